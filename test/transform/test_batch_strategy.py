"""SingleRecord and MultiRecord packing against MaxPayloadInMB."""

from sagemaker_tfs.transform.batch_strategy import Batch, Item, TooLarge, pack


def items(*bodies: bytes) -> list[Item]:
    return [Item(i, body, None, len(body) + 1) for i, body in enumerate(bodies)]


def bodies(batches) -> list:
    return [b.body if isinstance(b, Batch) else ("too large", b.index) for b in batches]


def test_single_record_sends_each_record_alone_and_refuses_one_over_the_limit():
    result = list(pack(items(b"a", b"b" * 11, b"c"), multi_record=False, limit=10, joiner=b"\n"))
    assert bodies(result) == [b"a", ("too large", 1), b"c"]
    assert [b.indexes for b in result if isinstance(b, Batch)] == [[0], [2]]


def test_multi_record_packs_greedily_in_order_up_to_the_limit_inclusive():
    result = list(pack(items(b"aaaa", b"bbbb", b"cc", b"dddddddddd", b"e"), multi_record=True, limit=10, joiner=b"\n"))
    # "aaaa\nbbbb" is 9 bytes, adding "\ncc" would make 12; "cc" alone then "dddddddddd" (exactly 10) alone
    assert bodies(result) == [b"aaaa\nbbbb", b"cc", b"dddddddddd", b"e"]
    assert [b.indexes for b in result] == [[0, 1], [2], [3], [4]]
    assert [b.size for b in result] == [10, 3, 11, 2]


def test_multi_record_reports_an_oversized_record_and_keeps_packing_the_others():
    result = list(pack(items(b"x" * 11, b"a", b"b", b"y" * 20, b"c"), multi_record=True, limit=10, joiner=b""))
    assert bodies(result) == [("too large", 0), ("too large", 3), b"abc"]
    assert result[-1].indexes == [1, 2, 4]


def test_no_limit_puts_everything_in_one_batch_and_nothing_for_no_records():
    assert bodies(pack(items(b"a" * 100, b"b"), multi_record=True, limit=0, joiner=b"\n")) == [b"a" * 100 + b"\nb"]
    assert list(pack([], multi_record=True, limit=10, joiner=b"\n")) == []
    assert isinstance(next(iter(pack(items(b"a" * 11), True, 10, b""))), TooLarge)
