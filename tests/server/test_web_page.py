"""End to end: the page at / in headless Chromium (Debian's package) driven by Playwright.

No browser is downloaded: Playwright launches /usr/bin/chromium (installed by .ci/run).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from playwright.async_api import Page, async_playwright, expect

from tests.server.conftest import SELF_RAG_ANSWERED, running_server

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
# Records every node the graph marks active, in order, as the page updates the SVG.
WATCH_ACTIVE = """() => {
  window.activeTrail = [];
  new MutationObserver((changes) => {
    for (const change of changes) {
      const node = change.target;
      if (node.classList && node.classList.contains("active")) {
        const id = node.getAttribute("data-node");
        if (window.activeTrail[window.activeTrail.length - 1] !== id) window.activeTrail.push(id);
      }
    }
  }).observe(document.querySelector("#graph"), {
    subtree: true, attributes: true, attributeFilter: ["class"],
  });
}"""


@pytest.fixture
async def browser(tmp_path):
    if not Path(CHROMIUM).exists():
        pytest.fail("Chromium is missing: apt-get install chromium chromium-driver")
    async with async_playwright() as playwright:
        context = await playwright.chromium.launch_persistent_context(
            str(tmp_path / "profile"),
            executable_path=CHROMIUM,
            args=FLAGS,
            headless=True,
            viewport={"width": 1400, "height": 1000},
        )
        yield context
        await context.close()


async def ask(page: Page, strategy: str, question: str) -> None:
    await page.select_option("#strategy", strategy)
    await expect(page.locator("#graph svg [data-node='prepare']")).to_be_visible()
    await page.evaluate(WATCH_ACTIVE)
    await page.fill("#question", question)
    await page.press("#question", "Enter")


def step_nodes(page: Page):
    return page.locator("#steps li.step").evaluate_all("rows => rows.map(r => r.dataset.node)")


async def test_a_question_runs_live_with_graph_steps_and_sourced_answer(browser, tmp_path):
    async with running_server(tmp_path / "data") as url:
        page = await browser.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        await page.goto(url)
        await expect(page.locator("#kb")).to_have_value("default")
        await ask(page, "self_rag", "What is Corrective RAG?")

        await expect(page.locator("#facts")).to_contain_text("answered", timeout=60_000)
        assert await step_nodes(page) == SELF_RAG_ANSWERED
        grading = page.locator("#steps li.step[data-node='grade_documents']")
        await expect(grading).to_contain_text("relevant → generate")
        await expect(grading.locator(".custom").first).to_contain_text("score=")
        await grading.locator("summary").click()
        await expect(grading.locator("pre")).to_contain_text('"doc_grades"')

        trail = await page.evaluate("window.activeTrail")
        assert trail[:3] == ["prepare", "decide_retrieval", "retrieve"] and trail[-1] == "finish"
        visited = page.locator("#graph [data-node='grade_generation']")
        await expect(visited).to_have_class("node visited")  # active moved on to finish
        await expect(page.locator("#graph path.taken")).to_have_count(8)

        await expect(page.locator("#answer")).to_contain_text("retrieval evaluator")
        await expect(page.locator("#sources li").first).to_contain_text("sample:corrective-rag")
        await expect(page.locator("#facts")).to_contain_text("LLM calls")
        await expect(page.locator("#threads")).to_contain_text("What is Corrective RAG")
        shot = tmp_path / "reflexrag-page.png"
        await page.screenshot(path=str(shot), full_page=True)
        assert shot.stat().st_size > 10_000
        assert errors == []


async def test_a_loop_shows_visit_counts(browser, tmp_path):
    async with running_server(tmp_path / "data") as url:
        page = await browser.new_page()
        await page.goto(url)
        await ask(page, "self_rag", "Who won the 1998 FIFA World Cup final?")
        # The rewrite finds only chunks the first retrieval read: the loop ends there.
        await expect(page.locator("#facts")).to_contain_text("no_new_evidence", timeout=60_000)
        retrieve = page.locator("#graph [data-node='retrieve']")
        await expect(retrieve).to_have_attribute("data-visits", "2")
        await expect(page.locator("#graph [data-edge='transform_query->retrieve']")).to_have_class(
            "edge taken"
        )
        await expect(page.locator("#answer")).to_have_class("answer not-found")


async def test_a_clarifying_question_is_asked_and_the_thread_resumes(browser, tmp_path):
    async with running_server(tmp_path / "data") as url:
        page = await browser.new_page()
        await page.goto(url)
        await ask(page, "adaptive", "What does it do?")
        await expect(page.locator("#clarify-form")).to_be_visible(timeout=60_000)
        await expect(page.locator("#clarify-question")).to_contain_text('"it"')
        await page.fill("#clarify-reply", "Self-RAG")
        await page.press("#clarify-reply", "Enter")
        await expect(page.locator("#facts")).to_contain_text("single_step", timeout=60_000)
        nodes = await step_nodes(page)
        assert nodes[:2] == ["prepare", "classify_complexity"]
        assert "clarify" in nodes and nodes[-1] == "finish"
        await expect(page.locator("#clarify-form")).to_be_hidden()
        await expect(page.locator("#threads li")).to_have_count(1)  # one thread, resumed


async def test_errors_read_as_messages_and_an_api_key_fixes_them(browser, tmp_path):
    async with running_server(tmp_path / "data", api_key="sesame") as url:
        page = await browser.new_page()
        await page.goto(url)
        await expect(page.locator("#banner")).to_contain_text("401")
        await page.fill("#api-key", "sesame")
        await page.press("#api-key", "Tab")  # change event: reload with the key
        await expect(page.locator("#banner")).to_be_hidden()
        await expect(page.locator("#strategy option")).not_to_have_count(0)


WATCH_TOKENS = """() => {
  window.tokenTexts = [];
  new MutationObserver(() => {
    const tokens = document.querySelector("#answer .tokens");
    if (tokens) window.tokenTexts.push(tokens.textContent);
  }).observe(document.querySelector("#answer"), {
    subtree: true, childList: true, characterData: true,
  });
}"""


async def test_generator_tokens_appear_as_they_stream(browser, tmp_path, monkeypatch):
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage

    from reflexrag.nodes.judges import GENERATOR_BACKENDS, JUDGE_BACKENDS
    from reflexrag.nodes.judges.llm import LLMGenerator, LLMJudge
    from reflexrag.providers.settings import get_settings

    yes = '{"binary_score": "yes"}'
    replies = ['{"retrieve": "yes"}', *[yes] * 4, '{"level": "fully"}', yes]
    grader = GenericFakeChatModel(messages=iter([AIMessage(r) for r in replies]))
    answer = "CRAG rewrites the query and falls back to web search [1]."
    writer = GenericFakeChatModel(messages=iter([AIMessage(answer)]))
    monkeypatch.setitem(JUDGE_BACKENDS, "fake", lambda context: LLMJudge(grader))
    monkeypatch.setitem(GENERATOR_BACKENDS, "fake", lambda context: LLMGenerator(writer))
    monkeypatch.setattr(get_settings(), "judge_backend", "fake")
    monkeypatch.setattr(get_settings(), "generator_backend", "fake")
    async with running_server(tmp_path / "data") as url:
        page = await browser.new_page()
        await page.goto(url)
        await expect(page.locator("#strategy option")).not_to_have_count(0)
        await page.evaluate(WATCH_TOKENS)
        await ask(page, "self_rag", "What is Corrective RAG?")
        await expect(page.locator("#facts")).to_contain_text("answered", timeout=60_000)
        seen = await page.evaluate("window.tokenTexts")
        partial = [text for text in dict.fromkeys(seen) if text and text != answer]
        assert partial and all(answer.startswith(text) for text in partial), seen
        await expect(page.locator("#answer")).to_have_text(answer)
        facts = await page.locator("#facts").inner_text()
        assert "LLM calls\n8" in facts


# Every edge's points, sampled along its path, against every node's box but its own two.
EDGES_CROSSING_NODES = """() => {
  const boxes = [...document.querySelectorAll("#graph [data-node]")].map((g) => {
    const r = g.querySelector("rect").getBBox(), m = g.transform.baseVal.consolidate().matrix;
    return { id: g.dataset.node, x: m.e + r.x, y: m.f + r.y, w: r.width, h: r.height };
  });
  const crossings = [];
  for (const path of document.querySelectorAll("#graph path.edge")) {
    const [source, target] = path.dataset.edge.split("->");
    const length = path.getTotalLength();
    for (let i = 1; i < 40; i++) {
      const p = path.getPointAtLength((length * i) / 40);
      for (const b of boxes) {
        if (b.id === source || b.id === target) continue;
        if (p.x > b.x + 2 && p.x < b.x + b.w - 2 && p.y > b.y + 2 && p.y < b.y + b.h - 2) {
          crossings.push(`${path.dataset.edge} crosses ${b.id}`);
        }
      }
    }
  }
  return [...new Set(crossings)];
}"""


async def test_no_edge_is_drawn_across_a_node_it_does_not_visit(browser, tmp_path):
    async with running_server(tmp_path / "data") as url:
        page = await browser.new_page()
        await page.goto(url)
        await expect(page.locator("#strategy option")).not_to_have_count(0)
        for strategy in ("naive", "self_rag", "crag", "self_crag", "iterative", "adaptive"):
            await page.select_option("#strategy", strategy)
            await expect(page.locator("#graph svg [data-node='prepare']")).to_be_visible()
            assert await page.evaluate(EDGES_CROSSING_NODES) == [], strategy


async def test_after_a_run_the_status_is_done_and_sources_are_listed_once(browser, tmp_path):
    async with running_server(tmp_path / "data") as url:
        page = await browser.new_page()
        await page.goto(url)
        await ask(page, "naive", "What is Corrective RAG?")
        await expect(page.locator("#run-status")).to_have_text("done", timeout=60_000)
        listed = await page.locator("#sources li").all_inner_texts()
        doc_ids = [text.split("(")[-1].split(")")[0] for text in listed]
        assert doc_ids and len(doc_ids) == len(set(doc_ids)), listed
        # Step numbers from 10 up keep their digits inside the list's margin.
        margin = await page.evaluate(
            "parseFloat(getComputedStyle(document.querySelector('#steps')).paddingLeft)"
        )
        assert margin >= 2.5 * 14
