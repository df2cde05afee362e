"""The overview's merge queues: one table per project and target branch, or a sentence when
no change waits to merge; every value escaped."""

from __future__ import annotations

import re

import pytest
from sqlalchemy.engine import Engine

from bot.app.promote import promote
from bot.core.events import Event as E
from bot.core.request import TransitionRequest
from bot.core.states import BindingState as S
from bot.store.fire import fire
from tests.api import fake_services
from tests.builders import make_operation, merge_line
from tests.pages import Pages, set_times

_ROW = re.compile(r"<tr>(.*?)</tr>", re.DOTALL)
_CELL = re.compile(r"<td>(.*?)</td>", re.DOTALL)


@pytest.fixture
def pages(db: Engine) -> Pages:
    """The app with the API token."""
    return Pages.build(db)


def queues(pages: Pages) -> str:
    """The overview's merge queue section."""
    found = re.search(r'<section id="queues">(.*?)</section>', pages.text("/"), re.DOTALL)
    assert found is not None
    return found.group(1)


def tables(section: str) -> list[tuple[str, list[list[str]]]]:
    """Each line's heading and its rows' cells, in page order."""
    parts = re.findall(r"<h3>(.*?)</h3>\s*<table.*?<tbody>(.*?)</tbody>", section, re.DOTALL)
    return [
        (" ".join(heading.split()), [_CELL.findall(row) for row in _ROW.findall(body)])
        for heading, body in parts
    ]


def test_no_change_waiting_says_so(pages: Pages) -> None:
    """Changes elsewhere in the workflow: the section says nobody waits, and shows no table."""
    make_operation(pages.engine, S.MR_CREATED)
    section = queues(pages)
    assert 'Merge queues <span class="muted">(0)</span>' in section
    assert "No change is waiting to merge." in section
    assert "<table" not in section


def test_one_table_per_line_head_first(pages: Pages) -> None:
    """Per project and branch: position, the change's title linking to its page, its MR, its
    step, and which merges next and which is paused on its pipeline."""
    db = pages.engine
    first, second, third = merge_line(db, 3, title="Scale api")
    fire(db, TransitionRequest(first, E.PIPELINE_TIMED_OUT))
    [other] = merge_line(db, 1, first_mr=201, target_branch="release/1.x", title="Patch")

    section = queues(pages)

    assert 'Merge queues <span class="muted">(4)</span>' in section
    assert "No change is waiting to merge." not in section
    (main, main_rows), (release, release_rows) = tables(section)
    assert main.startswith("<code>platform/config</code> → <code>main</code>")
    assert "(3 in line)" in main
    assert release.startswith("<code>platform/config</code> → <code>release/1.x</code>")
    assert [row[0] for row in main_rows] == ["1", "2", "3"]
    assert [re.findall(r'href="/changes/([^"]+)"', row[1]) for row in main_rows] == [
        [first],
        [second],
        [third],
    ]
    _, title, mr, step, waiting, _ = main_rows[0]
    assert ">Scale api</a>" in title
    assert mr == (
        '<a href="https://gitlab.example.com/platform/config/-/merge_requests/101" '
        'rel="noreferrer">!101</a>'
    )
    assert "<code>HANDLE_PIPELINE_PENDING 10501</code>" in step
    assert "waiting for the pipeline before the merge" in step
    assert waiting == "<strong>paused</strong> (pipeline pending)"
    assert main_rows[1][4] == "merges next"
    assert "in line" in main_rows[2][4]
    assert re.fullmatch(r"\d+s", main_rows[2][5])
    assert f'href="/changes/{other}"' in release_rows[0][1]
    assert release_rows[0][4] == "merges next"


def test_every_value_is_escaped(pages: Pages) -> None:
    """A title and a branch carrying markup are shown as text; an MR URL that is not a web URL
    is not linked."""
    db = pages.engine
    [op_id] = merge_line(
        db,
        1,
        title="<script>alert(1)</script>",
        target_branch='<img src=x onerror="alert(2)">',
    )
    set_times(db, op_id, mr_url="javascript:alert(3)")

    section = queues(pages)

    assert "<script>" not in section
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in section
    assert "<img" not in section
    assert "&lt;img src=x onerror=&#34;alert(2)&#34;&gt;" in section
    assert "javascript:" not in section


def test_a_promotion_shows_on_the_change_page(pages: Pages) -> None:
    """The promotion is a timeline row of its own: who moved it, and to the front of what."""
    db = pages.engine
    _, second = merge_line(db, 2)
    promote(fake_services(db), second, actor="cli:olivia")

    html = pages.text(f"/changes/{second}")

    row = re.findall(r"<tr>(.*?)</tr>", html.split('id="timeline"')[1], re.DOTALL)[-1]
    cells = _CELL.findall(row) + re.findall(r'<td class="muted">(.*?)</td>', row)
    assert "moved to the front of its merge queue" in cells
    assert "<code>promote</code>" in cells
    assert "cli:olivia" in cells
    assert "promoted to the front of main&#39;s merge queue" in cells


def test_the_change_page_gives_its_place(pages: Pages) -> None:
    """A merging change's page says where it stands in its line; another's has no such fact."""
    first, second = merge_line(pages.engine, 2)
    fire(pages.engine, TransitionRequest(first, E.PIPELINE_TIMED_OUT))

    assert (
        '<dd id="queue">2nd in line for main: merging next; the change ahead waits for its '
        "pipeline; 2 in line</dd>"
    ) in pages.text(f"/changes/{second}")
    assert 'id="queue"' not in pages.text(f"/changes/{make_operation(pages.engine, S.MERGED)}")
