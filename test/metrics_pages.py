"""Prometheus pages read by a test: scraped samples and waiting for counts."""

from __future__ import annotations

from clients import http_call
from processes import wait_for


def scrape(port: int, path: str = "/metrics") -> dict:
    """{(sample name, sorted labels): value} of a Prometheus page on a loopback port."""
    from prometheus_client.parser import text_string_to_metric_families

    answer = http_call(port, "GET", path)
    assert answer.status == 200, answer.text
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(answer.text)
        for s in family.samples
    }


def sample(page: dict, name: str, **labels) -> float | None:
    """The value of one sample of a scraped page, None when it is not there."""
    return page.get(metric(name, **labels))


def metric(name: str, **labels) -> tuple[str, tuple]:
    """A sample's key in a scraped page."""
    return name, tuple(sorted(labels.items()))


def counted_page(
    port: int,
    expected: dict[tuple[str, tuple], float],
    before: dict | None = None,
    path: str = "/metrics",
    timeout: float = 30.0,
) -> dict:
    """The page scraped once each sample of `expected` ({metric(name, **labels): value}) has its value, or, given
    the page `before`, has grown by it since (an absent sample counts 0). What a request adds to a page may come
    after its answer (gunicorn's workers write their totals twice a second, each its own; nginx's datagrams are
    read by serve): a test reads counts with this, not with one scrape after its requests."""
    pages = []

    def grown(page: dict, key: tuple[str, tuple]) -> float:
        return page.get(key, 0) - (before.get(key, 0) if before is not None else 0)

    def complete() -> bool:
        pages.append(scrape(port, path))
        return all(grown(pages[-1], key) == value for key, value in expected.items())

    try:
        wait_for(complete, timeout, f"the page to count {expected}")
    except AssertionError as failure:
        got = {key: grown(pages[-1], key) for key in expected}
        raise AssertionError(f"{failure}; it counts {got}") from None
    return pages[-1]
