"""``oneflow.core``: the protobuf messages legacy programs import from here.

``record.record_pb2`` (the OFRecord messages, from flowjob-ofrecord), ``common.data_type_pb2``,
``operator.op_conf_pb2`` (its ``ActivationType`` only) and ``job.initializer_conf_pb2``; each module's
``.proto`` file beside it is its documented source, and ``_descriptors`` builds their descriptors.
"""
