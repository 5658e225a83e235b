"""The question ledger (data/question-ledger.yaml): load it, check it, count it, and render the
'What people ask' page (docs/what-people-ask.md, marker `<!-- question-ledger -->`).

An entry's `answer` is a page path relative to docs/questions ("topic/slug"), `{partly: "topic/slug"}`,
"not yet" (with an optional `planned:` slug), or `{out_of_scope: reason}`. Only a full answer counts as
answered; the share is taken over the questions in scope (out-of-scope entries left out).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import yaml

from verify.pages import QUESTIONS, SAFE_LOADER, load_page
from verify.paths import DOCS_DIR, LEDGER_FILE

LEDGER = LEDGER_FILE
MARKER = "<!-- question-ledger -->"
HANDOUTS = {  # the keys of verify/website/hooks.py SOURCES; their errors are listed on the errata page
    "interview-handout": "Interview handout (《Accelerate分布式训练面试题》)",
    "course-slides": "Course slides (使用 AutoModel 和 Accelerator 准备模型)",
    "summary-article": "Summary article (《圖解分布式訓練（七）》)",
}
STATUSES = ("answered", "partly", "not yet", "out of scope")
SLUG = re.compile(r"^[a-z0-9-]+/[a-z0-9-]+$")

# Every concept guide and usage guide in Accelerate's docs/source at v1.15.0 (listed from the fetched
# repository: `git ls-tree v1.14.0 docs/source/{concept,usage}_guides`, the same file list as main =
# 1.15.0.dev0). Each must be the source of a ledger entry, answered or out of scope with a reason.
ACCELERATE_GUIDE_BASE = "https://github.com/huggingface/accelerate/blob/v1.15.0/docs/source/"
ACCELERATE_GUIDES = (
    "concept_guides/big_model_inference.md",
    "concept_guides/context_parallelism.md",
    "concept_guides/deferring_execution.md",
    "concept_guides/fsdp1_vs_fsdp2.md",
    "concept_guides/fsdp_and_deepspeed.md",
    "concept_guides/gradient_synchronization.md",
    "concept_guides/internal_mechanism.md",
    "concept_guides/low_precision_training.md",
    "concept_guides/performance.md",
    "concept_guides/sequence_parallelism.md",
    "concept_guides/training_tpu.md",
    "usage_guides/big_modeling.md",
    "usage_guides/checkpoint.md",
    "usage_guides/compilation.md",
    "usage_guides/ddp_comm_hook.md",
    "usage_guides/deepspeed.md",
    "usage_guides/deepspeed_multiple_model.md",
    "usage_guides/distributed_inference.md",
    "usage_guides/explore.md",
    "usage_guides/fsdp.md",
    "usage_guides/gaudi.md",
    "usage_guides/gradient_accumulation.md",
    "usage_guides/intel_cpu.md",
    "usage_guides/local_sgd.md",
    "usage_guides/low_precision_training.md",
    "usage_guides/megatron_lm.md",
    "usage_guides/model_size_estimator.md",
    "usage_guides/mps.md",
    "usage_guides/profiler.md",
    "usage_guides/quantization.md",
    "usage_guides/sagemaker.md",
    "usage_guides/tracking.md",
    "usage_guides/training_zoo.md",
)


@dataclass(frozen=True)
class Entry:
    question: str
    source: dict
    cluster: str
    answer: object
    planned: str | None = None
    also: tuple = ()

    @property
    def status(self) -> str:
        if self.answer == "not yet":
            return "not yet"
        if isinstance(self.answer, str):
            return "answered"
        if isinstance(self.answer, dict) and "partly" in self.answer:
            return "partly"
        return "out of scope"

    @property
    def page(self) -> str | None:
        """The page that answers it, fully or partly."""
        if self.status == "answered":
            return self.answer
        if self.status == "partly":
            return self.answer["partly"]
        return None


def load(path: Path = LEDGER) -> dict:
    return yaml.load(path.read_text(encoding="utf-8"), Loader=SAFE_LOADER)  # libyaml where installed: 10x faster


def entries(data: dict) -> list[Entry]:
    return [
        Entry(q.get("question"), q.get("source") or {}, q.get("cluster"), q.get("answer"), q.get("planned"),
              tuple(q.get("also") or ()))
        for q in data.get("questions") or []
    ]  # fmt: skip


def page_file(slug: str, docs_dir: Path = DOCS_DIR) -> Path:
    return docs_dir / QUESTIONS / f"{slug}.md"


def check(data: dict, docs_dir: Path = DOCS_DIR) -> list[str]:
    """Every problem with the ledger, as messages (empty when it is sound)."""
    errors = []
    kinds = data.get("kinds") or {}
    clusters = {c["id"] for c in data.get("clusters") or []}
    seen = set()
    for number, raw in enumerate(data.get("questions") or [], 1):
        where = f"questions[{number}] ({str(raw.get('question'))[:50]!r})"
        extra = set(raw) - {"question", "source", "cluster", "answer", "planned", "also"}
        if extra:
            errors.append(f"{where}: unknown keys {sorted(extra)}")
        question = raw.get("question")
        if not isinstance(question, str) or len(question.strip()) < 10:
            errors.append(f"{where}: question must be a sentence")
        source = raw.get("source")
        if not isinstance(source, dict):
            errors.append(f"{where}: source must be a mapping {{kind, url, title}}")
            source = {}
        if source.get("kind") not in kinds:
            errors.append(f"{where}: source kind {source.get('kind')!r} is not one of {sorted(kinds)}")
        if not source.get("title"):
            errors.append(f"{where}: source needs a title")
        if source.get("kind") == "handout":
            if source.get("ref") not in HANDOUTS:
                errors.append(f"{where}: a handout source names ref, one of {sorted(HANDOUTS)}")
        elif not re.match(r"^https?://\S+$", str(source.get("url", ""))):
            errors.append(f"{where}: source url must be an http(s) link")
        for url in raw.get("also") or []:
            if not re.match(r"^https?://\S+$", str(url)):
                errors.append(f"{where}: also lists a non-link {url!r}")
        if raw.get("cluster") not in clusters:
            errors.append(f"{where}: cluster {raw.get('cluster')!r} is not declared")
        answer = raw.get("answer")
        entry = entries({"questions": [raw]})[0]
        if isinstance(answer, str) and answer != "not yet":
            if not SLUG.match(answer):
                errors.append(f"{where}: answer {answer!r} is not 'topic/slug', 'not yet' or a mapping")
        elif isinstance(answer, dict):
            if len(answer) != 1 or next(iter(answer)) not in ("partly", "out_of_scope"):
                errors.append(f"{where}: answer mapping must be {{partly: page}} or {{out_of_scope: reason}}")
            elif "out_of_scope" in answer and len(str(answer["out_of_scope"])) < 15:
                errors.append(f"{where}: out_of_scope needs a reason")
            elif "partly" in answer and not SLUG.match(str(answer["partly"])):
                errors.append(f"{where}: partly names a page as 'topic/slug'")
        elif answer != "not yet":
            errors.append(f"{where}: answer missing or malformed")
        if entry.page and SLUG.match(entry.page) and not page_file(entry.page, docs_dir).is_file():
            errors.append(f"{where}: answer page {entry.page!r} does not exist (docs/{QUESTIONS}/{entry.page}.md)")
        planned = raw.get("planned")
        if planned is not None:
            if not SLUG.match(str(planned)):
                errors.append(f"{where}: planned must be 'topic/slug'")
            elif entry.status not in ("not yet", "partly"):
                errors.append(f"{where}: planned is only for 'not yet' and partly answers")
            elif page_file(planned, docs_dir).is_file() and planned != entry.page:
                errors.append(
                    f"{where}: the planned page {planned} now exists: read it, then set answer to it "
                    "(or to {partly: ...}) and drop planned"
                )
        key = (str(question).strip().lower(), source.get("url") or source.get("ref"))
        if key in seen:
            errors.append(f"{where}: the same question from the same source is listed twice")
        seen.add(key)
    return errors


def check_followups(data: dict, docs_dir: Path = DOCS_DIR) -> list[str]:
    """Part 4 of issue 18: existing pages' follow-ups that a (planned) page answers, tied to ledger questions."""
    errors = []
    questions = {q.get("question") for q in data.get("questions") or []}
    planned = {q.get("planned") for q in data.get("questions") or []} - {None}
    for number, item in enumerate(data.get("followups") or [], 1):
        where = f"followups[{number}]"
        path = page_file(str(item.get("page")), docs_dir)
        if not path.is_file():
            errors.append(f"{where}: page {item.get('page')!r} does not exist")
        elif str(item.get("followup")) not in path.read_text(encoding="utf-8"):
            errors.append(f"{where}: {item.get('page')} has no follow-up {item.get('followup')!r}")
        target = str(item.get("answered_by"))
        if target not in planned and not page_file(target, docs_dir).is_file():
            errors.append(f"{where}: answered_by {target!r} is neither an existing page nor a planned slug")
        for question in item.get("ledger") or []:
            if question not in questions:
                errors.append(f"{where}: ledger question {question[:60]!r} is not in the ledger")
    return errors


def counts(items: list[Entry]) -> dict:
    statuses = Counter(entry.status for entry in items)
    in_scope = len(items) - statuses["out of scope"]
    return {
        "total": len(items),
        "statuses": {status: statuses[status] for status in STATUSES},
        "kinds": dict(Counter(entry.source.get("kind") for entry in items)),
        "in_scope": in_scope,
        "answered_share": statuses["answered"] / in_scope if in_scope else 0.0,
    }


def relative_link(target: str, from_page: Path, docs_dir: Path = DOCS_DIR) -> str:
    """A Markdown link from from_page to a docs-relative target (so mkdocs checks it)."""
    depth = len(from_page.relative_to(docs_dir).parts) - 1
    return PurePosixPath(*([".."] * depth), target).as_posix()


def cell(text: str) -> str:
    """Text for a Markdown table cell."""
    return str(text).replace("|", "\\|").replace("\n", " ")


def link_text(text: str) -> str:
    return cell(text).replace("[", "\\[").replace("]", "\\]")


def source_cell(entry: Entry, from_page: Path, docs_dir: Path) -> str:
    source = entry.source
    if source.get("kind") == "handout":
        main = f"[{link_text(source['title'])}]({relative_link('errata.md', from_page, docs_dir)})"
    else:
        main = f"[{link_text(source['title'])}]({source['url']})"
    if entry.also:
        main += " " + " ".join(f"[[{n}]]({url})" for n, url in enumerate(entry.also, 2))
    return main


def answer_cell(entry: Entry, from_page: Path, docs_dir: Path) -> str:
    if entry.page:
        title = load_page(page_file(entry.page, docs_dir)).title
        link = f"[{link_text(title)}]({relative_link(f'{QUESTIONS}/{entry.page}.md', from_page, docs_dir)})"
        if entry.status == "answered":
            return f"**answered**: {link}"
        planned = f" (planned: `{entry.planned}`)" if entry.planned else ""
        return f"partly: {link}{planned}"
    if entry.status == "not yet":
        return "**not yet**" + (f" (planned: `{entry.planned}`)" if entry.planned else "")
    return f"out of scope: {cell(entry.answer['out_of_scope'])}"


def render(from_page: Path, data: dict | None = None, docs_dir: Path = DOCS_DIR) -> str:
    """The ledger as Markdown: a summary, then one table per cluster."""
    data = data if data is not None else load()
    problems = check(data, docs_dir)
    if problems:
        raise ValueError("data/question-ledger.yaml is not sound:\n" + "\n".join(problems))
    items = entries(data)
    total = counts(items)
    kinds = data["kinds"]
    lines = [
        f"**{total['total']} questions** from {len(total['kinds'])} kinds of source. Answered fully by a page: "
        f"**{total['statuses']['answered']}** ({100 * total['answered_share']:.0f}% of the {total['in_scope']} in "
        f"scope); partly: {total['statuses']['partly']}; not yet: {total['statuses']['not yet']}; out of scope: "
        f"{total['statuses']['out of scope']}.",
        "",
        "| source | questions |",
        "|---|---|",
        *(f"| {cell(kinds[kind])} | {count} |"
          for kind, count in sorted(total["kinds"].items(), key=lambda kv: -kv[1])),  # fmt: skip
        "",
        "| cluster | questions | answered | partly | not yet | out of scope |",
        "|---|---|---|---|---|---|",
    ]
    by_cluster = {c["id"]: [e for e in items if e.cluster == c["id"]] for c in data["clusters"]}
    for cluster in data["clusters"]:
        found = by_cluster[cluster["id"]]
        if not found:
            continue
        c = Counter(e.status for e in found)
        lines.append(
            f"| [{link_text(cluster['title'])}](#{cluster['id']}) | {len(found)} | {c['answered']} | {c['partly']} "
            f"| {c['not yet']} | {c['out of scope']} |"
        )
    order = {status: n for n, status in enumerate(STATUSES)}
    for cluster in data["clusters"]:
        found = sorted(by_cluster[cluster["id"]], key=lambda e: order[e.status])
        if not found:
            continue
        lines += ["", f"## {cluster['title']} {{#{cluster['id']}}}", "",
                  "| question | asked or taught in | answer |", "|---|---|---|"]  # fmt: skip
        for entry in found:
            lines.append(
                f"| {cell(entry.question)} | {source_cell(entry, from_page, docs_dir)} "
                f"| {answer_cell(entry, from_page, docs_dir)} |"
            )
    return "\n".join(lines)
