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
