"""``flow.data``: datasets (from flowjob-data), the OFRecord readers and decoders (from flowjob-ofrecord) and
decode_random (from flowjob-ops)."""
from oneflow._exports import Source, export

SOURCES = (Source("flowjob_data", "flowjob-data", legacy=("load_mnist",)),
           Source("flowjob_ofrecord.api.data", "flowjob-ofrecord", legacy=("ofrecord_reader", "OFRecordRawDecoder")),
           Source("flowjob_ofrecord.api.blob_conf", "flowjob-ofrecord"),  # legacy's older API (BlobConf)
           Source("flowjob_ofrecord.api.coco", "flowjob-ofrecord", legacy=("coco_reader",)),  # COCO detection data
           Source("flowjob_ofrecord.api.megatron", "flowjob-ofrecord",
                  legacy=("MegatronGPTMMapDataLoader", "megatron_gpt_mmap_data_loader")),  # GPT token batches
           Source("flowjob_ops.api.data", "flowjob-ops", legacy=("decode_random",)))  # synthetic batches

__all__ = export(globals(), "flow.data", *SOURCES)
