"""Long-lived objects kept out of the cyclic collector (`shambench.memory`)."""

import gc
import weakref

from shambench.memory import collector_paused, freeze_long_lived, long_lived_frozen


class Node:
    def __init__(self) -> None:
        self.me = self  # a reference cycle: only the cyclic collector frees it


def test_a_block_freezes_what_is_alive_and_unfreezes_it_after():
    gc.unfreeze()
    with long_lived_frozen():
        assert gc.get_freeze_count() > 0
    assert gc.get_freeze_count() == 0


def test_cyclic_garbage_frozen_in_a_block_is_collected_after_it():
    gc.unfreeze()
    node = Node()
    alive = weakref.ref(node)
    with long_lived_frozen():
        del node
        gc.collect()
        assert alive() is not None  # frozen: the collector does not see it
    gc.collect()
    assert alive() is None


def test_only_the_last_open_block_unfreezes():
    gc.unfreeze()
    with long_lived_frozen():
        with long_lived_frozen():
            pass
        assert gc.get_freeze_count() > 0
    assert gc.get_freeze_count() == 0


def test_freezing_more_happens_only_inside_a_block():
    gc.unfreeze()
    freeze_long_lived()
    assert gc.get_freeze_count() == 0
    with long_lived_frozen():
        before = gc.get_freeze_count()
        made = [Node() for _ in range(100)]
        freeze_long_lived()
        assert gc.get_freeze_count() >= before + 100
        del made
    assert gc.get_freeze_count() == 0


def test_the_collector_is_paused_in_a_block_and_left_as_it_was_after():
    assert gc.isenabled()
    with long_lived_frozen(), collector_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()
    try:
        with collector_paused():
            pass
        assert not gc.isenabled()  # a caller who paused it keeps it paused
    finally:
        gc.enable()


def test_an_error_in_a_paused_block_still_resumes_the_collector():
    try:
        with collector_paused():
            raise ValueError("boom")
    except ValueError:
        pass
    assert gc.isenabled()


def test_an_aged_block_restarts_the_collector_with_what_it_made_in_its_oldest_generation():
    gc.unfreeze()
    gc.collect()
    with collector_paused(aged=True):
        made = [Node() for _ in range(5000)]
        assert gc.get_count()[0] >= 5000  # young, while paused
    assert gc.isenabled() and gc.get_freeze_count() == 0
    assert gc.get_count()[0] < 100  # nothing young left for the next pass to walk
    # Still collectable: cyclic garbage in the oldest generation goes at the next full collection.
    alive = weakref.ref(made[0])
    del made
    gc.collect()
    assert alive() is None


def test_objects_frozen_by_someone_else_stay_frozen_through_a_paused_block():
    gc.unfreeze()
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        with collector_paused(aged=True):
            made = [Node() for _ in range(100)]
        assert gc.get_freeze_count() == frozen and len(made) == 100
    finally:
        gc.unfreeze()
    with long_lived_frozen():
        frozen = gc.get_freeze_count()
        with collector_paused(aged=True):
            pass
        assert gc.get_freeze_count() == frozen  # a run's frozen objects stay frozen till its block ends
    assert gc.get_freeze_count() == 0
