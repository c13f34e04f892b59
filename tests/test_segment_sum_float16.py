"""float16 segment sums are accumulated in float32 and rounded once, as legacy's half kernels did (its op
test compares with a float32 sum rounded to float16 at 1e-3): summing thousands of halves one by one in
float16 drifts far past that."""
import numpy as np

import oneflow as flow
import oneflow.typing as tp
from flowjob_core.testing.modules import sibling

fresh_session = sibling(__file__, "op_surface_helpers").fresh_session


def test_float16_sums_match_a_float32_sum_rounded_once():
    rng = np.random.default_rng(0)
    data = rng.random((6144, 5)).astype(np.float16)
    ids = rng.integers(0, 4, 6144).astype(np.int32)

    @flow.global_function()
    def job(d: tp.Numpy.Placeholder((6144, 5), dtype=flow.float16),
            i: tp.Numpy.Placeholder((6144,), dtype=flow.int32)) -> tp.Numpy:
        return flow.math.unsorted_segment_sum(d, i, num_segments=4, axis=0)

    want = np.zeros((4, 5), np.float32)
    np.add.at(want, ids, data.astype(np.float32))
    got = job(data, ids)
    assert got.dtype == np.float16
    np.testing.assert_array_equal(got, want.astype(np.float16))
