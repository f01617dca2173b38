"""The dbt docs site, opened in headless Chromium: the lineage of `gold.fct_visits`.

`dbt docs generate` (what `make docs` runs) writes the site to dbt's target directory;
it is served on loopback and loaded in a real browser. The lineage graph is drawn by
cytoscape on a canvas, so the test reads the graph the page rendered from the app's own
cytoscape instance (`window.graph`): the nodes it holds, their labels and on-screen
positions, and the edges it walks upstream. Nothing is read from manifest.json here.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.browser import open_page, serve_directory
from tests.helpers import reset_lakehouse

MODEL = "model.lakehouse.fct_visits"
# The Bronze tables (models/staging/blog/_blog__sources.yml) fct_visits is built from.
BRONZE_SOURCES = {
    "source.lakehouse.blog.blog_public_users": "blog.blog_public_users",
    "source.lakehouse.blog.blog_public_articles": "blog.blog_public_articles",
    "source.lakehouse.blog.blog_visits": "blog.blog_visits",
}
# Requests the dbt docs app itself gets wrong, whatever the project: two image paths
# from Angular templates it never renders and a favicon path from its build.
DBT_DOCS_OWN_404S = (
    "/%7B%7B%20getIcon(item.type,%20'on')%20%7D%7D",
    "/%7B%7B%20getIcon(item.type,%20'off')%20%7D%7D",
    "/$%7Brequire('./assets/favicons/favicon.ico')%7D",
)

_READ_GRAPH = """
(model) => {
  const cy = window.graph;
  const box = cy.container().getBoundingClientRect();
  const shown = cy.nodes().filter(n => n.visible());
  return {
    width: box.width,
    height: box.height,
    upstream: cy.getElementById(model).predecessors('node').map(n => n.id()),
    nodes: shown.map(n => ({
      id: n.id(),
      label: n.data('label'),
      x: n.renderedPosition().x,
      y: n.renderedPosition().y,
    })),
  };
}
"""


@pytest.fixture(scope="module")
def docs_site(spark, dbt) -> Path:
    """The site of an empty lakehouse: the lineage comes from the project itself."""
    reset_lakehouse(spark)
    # One thread: `docs generate` runs the on-run-start hooks side by side otherwise,
    # and on a fresh lakehouse create_ops_tables can run before the ops schema exists.
    dbt("docs", "generate", "--threads", "1")
    target = Path(os.environ["DBT_TARGET_PATH"])
    assert (target / "index.html").is_file()
    return target


def _known_docs_noise(request: str) -> bool:
    """A 404 (or an aborted load) of one of the dbt docs app's own bad paths."""
    url = request.split(" ")[1].removesuffix(":")
    return any(url.endswith(path) for path in DBT_DOCS_OWN_404S)


def test_lineage_of_fct_visits_shows_its_bronze_sources(
    docs_site: Path, lakehouse_home: Path
) -> None:
    shot = lakehouse_home / "screenshots" / "docs_lineage_fct_visits.png"
    with serve_directory(docs_site) as base, open_page(f"{base}index.html#!/model/{MODEL}") as p:
        page = p.page
        page.wait_for_selector("h1:has-text('fct_visits')", timeout=30_000)
        # The model page's lineage: the launcher, full screen, then everything upstream.
        page.click(".launcher-btn a")
        page.click("a[ng-click='showExpanded()']")
        selector = page.locator("input[ng-model='selectorService.selection.dirty.include']")
        assert selector.input_value() == "+fct_visits+"
        selector.fill("+fct_visits")
        page.click("#submit-graph-selection")
        page.wait_for_function(
            "(n) => window.graph.nodes().filter(x => x.id().startsWith('source.')).length >= n",
            arg=len(BRONZE_SOURCES),
            timeout=30_000,
        )
        page.wait_for_timeout(500)  # the layout's animation
        graph = page.evaluate(_READ_GRAPH, MODEL)
        png = p.screenshot(shot, selector="#graph-viz-wrapper")
        image = p.image_stats(png)
        page_errors = list(p.page_errors)
        failed = list(p.failed_requests)
        console = list(p.console_errors)

    # The Bronze sources are upstream of the model in the graph the page drew.
    upstream_sources = {n for n in graph["upstream"] if n.startswith("source.")}
    assert upstream_sources == set(BRONZE_SOURCES)
    shown = {n["id"]: n for n in graph["nodes"]}
    assert MODEL in shown
    assert {n for n in shown if n.startswith("source.")} == set(BRONZE_SOURCES)
    assert set(graph["upstream"]) | {MODEL} == set(shown)  # "+fct_visits": upstream only
    for source, label in BRONZE_SOURCES.items():
        node = shown[source]
        assert node["label"] == label
        assert 0 <= node["x"] <= graph["width"] and 0 <= node["y"] <= graph["height"], node
        # Upstream is drawn to the left of the model (left-to-right layout).
        assert node["x"] < shown[MODEL]["x"]
    for staging in ("stg_blog__users", "stg_blog__articles", "stg_blog__visits"):
        assert f"model.lakehouse.{staging}" in shown

    assert page_errors == []
    unexpected = [r for r in failed if not _known_docs_noise(r)]
    assert unexpected == []
    # Each of those 404s logs one "Failed to load resource" console error, nothing else.
    not_found = [r for r in failed if r.startswith("404 ")]
    assert console == [
        "Failed to load resource: the server responded with a status of 404 (File not found)"
    ] * len(not_found)

    assert shot.read_bytes() == png
    assert image["width"] > 600 and image["height"] > 300, image
    # A blank or single-colour capture has a handful of colours; nodes, labels and
    # anti-aliased edges give hundreds.
    assert image["colours"] > 200, image
