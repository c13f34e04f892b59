"""Legacy's questions about the run's processes answered by the MPI world on every rank."""
import json

import numpy as np

from flowjob_core.testing.modules import sibling

ok, ranks = sibling(__file__, "mpirun").ok, sibling(__file__, "mpirun").ranks


def test_each_rank_knows_its_rank_machine_and_the_world(tmp_path):
    ok(ranks(3, "ranks.py", tmp_path))
    got = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(3)]
    # one host: ranks stand for machines, so machine ids are the ranks and there are 3 nodes
    assert got == [{"rank": r, "world_size": 3, "machine": r, "has_world_size": True, "env_world_size": 3,
                    "node_size": 3} for r in range(3)]


def test_mirrored_results_hold_every_device_of_every_rank_in_rank_order(tmp_path):
    ok(ranks(2, "devices.py", tmp_path))
    want = np.stack([np.full((3, 2), 2.0 * (10 * r + d), np.float32) for r in range(2) for d in range(2)])
    for r in range(2):
        np.testing.assert_array_equal(np.load(tmp_path / f"rank{r}.npy"), want)


def test_an_op_with_a_traced_target_shape_is_refused_on_every_rank_naming_it(tmp_path):
    result = ok(ranks(2, "fixed_shape.py", timeout=60))
    for r in (0, 1):
        assert f"rank {r} refused: " in result.stderr and f"rank {r} still usable" in result.stderr
    assert "op 'widened' (broadcast_to)" in result.stderr and "cannot follow a rank's rows" in result.stderr
