import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from shambench.scoring.arrays import runs


def test_runs_lay_each_first_to_first_plus_count_end_to_end():
    assert runs(np.array([5, 0, 9]), np.array([2, 0, 3])).tolist() == [5, 6, 9, 10, 11]
    assert runs(np.array([], np.int64), np.array([], np.int64)).tolist() == []


@given(st.lists(st.tuples(st.integers(0, 100), st.integers(0, 5)), max_size=8))
def test_runs_equal_the_concatenated_ranges(pairs):
    firsts, counts = np.array([f for f, _ in pairs], np.int64), np.array([c for _, c in pairs], np.int64)
    assert runs(firsts, counts).tolist() == [i for f, c in pairs for i in range(f, f + c)]
