"""``oneflow.core``: the protobuf messages legacy programs import from here.

``record.record_pb2`` (the OFRecord messages, from flowjob-ofrecord), ``common.data_type_pb2``,
``operator.op_conf_pb2`` (``ActivationType`` and a saved model's ``OperatorConf``), ``job.initializer_conf_pb2``
and the saved-model format (``serving.saved_model_pb2`` and the files it imports); each module's ``.proto``
file beside it is its documented source, and ``_descriptors`` builds their descriptors.
"""
