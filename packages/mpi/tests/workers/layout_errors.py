"""Declared layouts a job cannot have on several ranks: python layout_errors.py CASE (each ends with the error)."""
import sys

import numpy as np
import oneflow as flow
import oneflow.typing as tp

case = sys.argv[1]

if case == "uneven":  # 7 rows cannot split evenly over 2 ranks
    @flow.global_function()
    def uneven_job(ids: tp.Numpy.Placeholder((4,), dtype=flow.int32)) -> tp.Numpy:
        table = flow.get_variable("table", (7, 3), distribute=flow.distribute.split(0))
        return flow.gather(table, ids)

    uneven_job(np.zeros(4, dtype=np.int32))
