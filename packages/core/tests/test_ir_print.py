"""``str(job)``: a header, one line per node, then returns, losses, side outputs and intents; with the op
records effects are marked, with the function's bindings what the job's keys name is listed."""
import copy
import dataclasses

import numpy as np

from flowjob_core import BlobSpec, Effects, Intent, JobFunction, OpDef, SideOutput, apply
from flowjob_core.ir.bindings import Bindings
from flowjob_core.ir.job import Job, Node, Placeholder, VariableDef
from flowjob_core.ir.printing import format_job, format_value

F32 = np.dtype(np.float32)


def _small_job() -> Job:
    x, w = BlobSpec((4, 3), F32), BlobSpec((3,), F32)
    job = Job("train_step", "train")
    job.placeholders.append(Placeholder("Input_0", "Input_0/out", x, 0, "x"))
    job.variables["w"] = VariableDef("w", w, "RandomUniform(minval=0, maxval=1)", True, "w/out", "Penalty#1")
    job.variables["step"] = VariableDef("step", BlobSpec((), np.int64), "zeros", False, "step/out")
    job.nodes += [
        Node("input", "Input_0", (), ("Input_0/out",), {"shape": (4, 3), "dtype": F32, "index": 0}),
        Node("variable", "w", (), ("w/out",), {"name": "w", "shape": (3,), "dtype": F32}, "gpu"),
        Node("toy_add", "y", ("Input_0/out", "w/out"), ("y/out_0",), {}, "gpu"),
        Node("pad", "p", ("y/out_0",), ("p/out_0",), {"paddings": tuple(range(10)), "mode": "constant",
                                                       "value": np.float32(0.5)}),
        Node("return", "Return_1", ("p/out_0",), ("Return_1/out",)),
        Node("toy_update", "u", ("w/out", "y/out_0"), ()),
    ]
    job.specs.update({"Input_0/out": x, "w/out": w, "y/out_0": x, "p/out_0": BlobSpec((9, 3), F32),
                      "Return_1/out": BlobSpec((9, 3), F32)})
    job.returns.append("Return_1/out")
    job.losses.append("y/out_0")
    job.side_outputs.append(SideOutput("y/out_0", "watch#2", "y/out_0:diff"))
    job.intents.append(Intent("watch", {"lbn": "y/out_0", "sink": "Stats#0", "diff": True}))
    return job


GOLDEN = """\
job train_step (train)
  placeholder Input_0/out: (4, 3):float32  (parameter x)
  variable w: (3,):float32  init RandomUniform(minval=0, maxval=1)  regularizer Penalty#1 @gpu
  variable step: ():int64  init zeros, not trainable
nodes:
  y/out_0: (4, 3):float32 = toy_add(Input_0/out, w/out) @gpu
  p/out_0: (9, 3):float32 = pad(y/out_0) {mode='constant', paddings=(0, 1, 2, 3, ..., 9, len=10), value=0.5}
  Return_1/out: (9, 3):float32 = return(p/out_0)
  effect! toy_update(w/out, y/out_0)
returns: Return_1/out
losses: y/out_0
side outputs:
  y/out_0 -> watch#2  (y/out_0:diff)
intents:
  watch {diff=True, lbn='y/out_0', sink='Stats#0'}"""


def test_a_small_job_prints_exactly():
    assert str(_small_job()) == GOLDEN


class Stats:
    """A sink without a readable repr."""


@dataclasses.dataclass(frozen=True)
class Penalty:
    l2: float


def _same(inputs, attrs):
    return list(inputs[:1])


OPS = {"return": OpDef("return", _same, effects=Effects(effect=True)),
       "toy_update": OpDef("toy_update", lambda i, a: [], effects=Effects(mutates=(0,)))}


def test_with_the_op_records_and_the_bindings_effects_are_marked_and_keys_described():
    bindings = Bindings()
    keys = [bindings.add(Stats()), bindings.add(Penalty(0.1)), bindings.add(lambda value: None, "watch"),
            bindings.add(object(), "unused")]
    assert keys == ["Stats#0", "Penalty#1", "watch#2", "unused#3"]
    text = format_job(_small_job(), OPS, bindings)
    assert text.splitlines()[5:10] == [
        "  y/out_0: (4, 3):float32 = toy_add(Input_0/out, w/out) @gpu",
        "  p/out_0: (9, 3):float32 = pad(y/out_0) {mode='constant', paddings=(0, 1, 2, 3, ..., 9, len=10), value=0.5}",
        "  effect! Return_1/out: (9, 3):float32 = return(p/out_0)",
        "  update! w <- toy_update(w/out, y/out_0)",
        "returns: Return_1/out"]
    assert text.endswith("""
bindings:
  Stats#0: Stats
  Penalty#1: Penalty(l2=0.1)
  watch#2: test_with_the_op_records_and_the_bindings_effects_are_marked_and_keys_described.<locals>.<lambda>""")


def test_printing_reads_the_job_only_and_copies_print_alike():
    job = _small_job()
    clone = copy.deepcopy(job)
    assert clone == job and str(clone) == str(job)


def test_values_are_shortened_to_keep_one_node_on_one_line():
    assert format_value((7,)) == "(7,)"
    assert format_value([1, 2, 3]) == "[1, 2, 3]"
    assert format_value(np.zeros((2, 5), np.float16)) == "array(2, 5):float16"
    assert format_value(np.int32) == "int32"
    assert format_value("x" * 100) == "'" + "x" * 56 + "..."
    assert len(format_value(tuple(range(1000)))) < 40


def test_a_traced_job_prints_its_nodes_in_order(session, toy):
    def job(x: toy.Array((3,))) -> toy.Sync:
        return apply("twice", [apply("twice", [x], name="a")], name="b")

    text = str(JobFunction(job, "predict", None, session).ensure_traced())
    lines = text.splitlines()
    assert lines[0] == "job job (predict)"
    assert lines[1].startswith("  placeholder Input_") and lines[1].endswith(": (3,):float32  (parameter x)")
    body = lines[lines.index("nodes:") + 1:]
    assert body[0] == f"  a/out_0: (3,):float32 = twice({lines[1].split()[1][:-1]})"  # the placeholder: once
    assert body[1] == "  b/out_0: (3,):float32 = twice(a/out_0)"
    assert body[2].startswith("  Return_") and body[2].endswith(" = return(b/out_0)")
    assert lines[-1].startswith("returns: Return_")


def test_a_node_shows_its_placement_and_the_ranks_a_plugin_mapped_it_to():
    job = _small_job()
    job.nodes[2] = dataclasses.replace(job.nodes[2], placement=("0:0-1",))
    job.nodes[3] = dataclasses.replace(job.nodes[3], placement=("0:1", "1:0"))
    assert "y/out_0: (4, 3):float32 on 0:0-1 = toy_add(" in str(job)
    job.ranks.update({"y": (0, 1), "p": (1, 2), "Return_1": (0, 1, 2, 4), "u": (3,)})
    text = str(job)
    assert "y/out_0: (4, 3):float32 on 0:0-1 (ranks 0-1) = toy_add(" in text
    assert "p/out_0: (9, 3):float32 on 0:1,1:0 (ranks 1-2) = pad(" in text
    assert "Return_1/out: (9, 3):float32 on ranks 0-2,4 = return(" in text
    assert "effect! toy_update(w/out, y/out_0) on rank 3" in text  # no outputs: after the call
