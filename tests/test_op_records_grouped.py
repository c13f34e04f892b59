"""Every op record the installed plugins register is written with ``OpDef``'s grouped records (``compute=``,
``effects=``, ``shape=``, ``legacy=``), not with the flat keywords ``OpDef`` still takes from older plugins with a
DeprecationWarning: a record added in the flat form fails here, naming the op and its fields."""
import subprocess
import sys

# a fresh interpreter: the records are made when their modules are imported, which this one may have done already
PROGRAM = """
import warnings
warnings.filterwarnings("error", message=r"op '.*': OpDef's flat keywords are deprecated", category=DeprecationWarning)
from flowjob_core import Session
session = Session()
print(len(session.registries.ops))
session.close()
"""


def test_no_installed_plugin_makes_a_record_with_the_flat_keywords():
    done = subprocess.run([sys.executable, "-c", PROGRAM], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert int(done.stdout.split()[-1]) > 300  # every plugin's records were made (flowjob-ops alone has hundreds)
