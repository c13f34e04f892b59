"""flowjob_ofrecord: legacy OneFlow's OFRecord files, readers and decoders for flowjob."""

from flowjob_ofrecord.errors import OFRecordError
from flowjob_ofrecord.files import iter_records, part_name, write_part

__version__ = "0.1.0"
__all__ = ["OFRecordError", "iter_records", "part_name", "write_part"]
