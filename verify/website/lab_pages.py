"""Lab pages: docs/labs/*.py notebooks (jupytext percent format), rendered by mkdocs-jupyter.

The .py is the source; `pytest verify` keeps the executed notebook in .verify/labs/. A lab page shows
that executed copy when there is one, else the bare source and the command that runs it; then the
evidence of its claims, as a question page does. Called from verify/website/hooks.py.
"""

from __future__ import annotations

import hashlib
import json
import re as _re
from pathlib import Path

import markdown as _markdown

from verify import evidence as _evidence
from verify import labs as _labs
from verify.paths import CLEANED_DIR

_NOTEBOOK_CSS = "assets/notebook.css"  # the ~590 KB of notebook styles, written once instead of per page
_EXTERNAL_SCRIPT = _re.compile(
    r"<script[^>]*\bsrc=(?:[\"']?(?:https?:)?//[^>]*|\"\")>\s*</script>"  # MathJax from a CDN, or src=""
    r"|<script type=\"text/x-mathjax-config\">.*?</script>"
    r"|<script type=\"module\">(?:(?!</script>).)*?(?:https?:)?//cdn(?:(?!</script>).)*</script>",  # Mermaid
    _re.S,
)
_STYLE = _re.compile(r"<style type=\"text/css\">(.*?)</style>", _re.S)


def lab_name(file) -> str | None:
    uri = getattr(file, "src_uri", "") or ""
    return Path(uri).stem if uri.startswith("labs/") and uri.endswith(".py") else None


def executed_copy(name: str) -> Path | None:
    """The executed notebook a lab page shows: this machine's, else the committed reference run's."""
    for folder in (_labs.EXECUTED_DIR, _evidence.REFERENCE_EVIDENCE_DIR / "labs"):
        if (folder / f"{name}.ipynb").exists():
            return folder / f"{name}.ipynb"
    return None


# Output a reader should not see: tqdm's warning that ipywidgets is missing, which carries the path of the
# machine that ran the notebook.
_NOISE = _re.compile(r"TqdmWarning|IProgress not found")


def drop_noise(notebook: dict) -> int:
    """Remove the stderr outputs a reader should not see; returns how many went."""
    dropped = 0
    for cell in notebook.get("cells", []):
        outputs = cell.get("outputs") or []
        text = lambda o: "".join(o.get("text") or "") if isinstance(o.get("text"), list) else str(o.get("text") or "")  # noqa: E731
        kept = [o for o in outputs if not (o.get("name") == "stderr" and _NOISE.search(text(o)))]
        dropped += len(outputs) - len(kept)
        if outputs:
            cell["outputs"] = kept
    return dropped


def cleaned_copy(executed: Path, cache_dir: Path) -> Path:
    """The executed notebook without stderr noise (a copy in the build's cache when anything was dropped)."""
    notebook = json.loads(executed.read_text())
    if not drop_noise(notebook):
        return executed
    cache_dir.mkdir(parents=True, exist_ok=True)
    copy = cache_dir / executed.name
    copy.write_text(json.dumps(notebook, indent=1, ensure_ascii=False))
    return copy


def use_executed_copies(files, cache_dir: Path | None = None):
    """A lab with an executed copy from `pytest verify` is rendered from that copy (noise dropped)."""
    for file in files:
        name = lab_name(file)
        executed = executed_copy(name) if name else None
        if executed is not None:
            # (a folder named labs: mkdocs-jupyter renders only paths that match its `labs/*.ipynb`)
            # one folder per source folder, so that builds from different executed copies never share one
            tag = hashlib.sha256(str(executed.parent).encode()).hexdigest()[:12]
            executed = cleaned_copy(executed, cache_dir or CLEANED_DIR / tag / "labs")
            # mkdocs-jupyter's NotebookFile wraps the File (`.file`); abs_src_path is a cached
            # property of each, so set it on both
            for layer in {id(file): file, id(getattr(file, "file", file)): getattr(file, "file", file)}.values():
                layer.abs_src_path = str(executed)
    return files


def _lab_banner(name: str, up: str) -> str:
    executed = executed_copy(name)
    source = f"docs/labs/{name}.py"
    how = (f"[Download it as a notebook (`{name}.ipynb`)]({up}downloads/labs/{name}.ipynb){{ download=\"{name}.ipynb\" }} "
           f"with [`_claims.py`]({up}downloads/_claims.py){{ download=\"_claims.py\" }} beside it, and open it in Jupyter; "
           f"or, in a clone of the repository, open `{source}` with jupytext, or run and judge it: "
           f"`python -m pytest verify -k {name}`.")  # fmt: skip
    if executed is not None:
        run = json.loads(executed.read_text()).get("metadata", {}).get("verify", {})
        reference = executed.parent != _labs.EXECUTED_DIR
        title = ("Outputs of the reference run (not this machine's)" if reference
                 else "Outputs of the latest `pytest verify` run on this machine")  # fmt: skip
        body = (f"Executed {run.get('date', '?')} in {run.get('seconds', '?')} s, status **{run.get('status', '?')}**. "
                f"Source: `{source}`. {how}")  # fmt: skip
        return f'!!! info "{title}"\n    {body}'
    return f'!!! info "Not run on this machine yet: the source without outputs"\n    {how}'


def lab_page_content(html_text, page, config, evidence_block):
    name = lab_name(page.file)
    if not name:
        return html_text
    proof = _labs.read_lab(_labs.LABS_DIR / f"{name}.py")
    up = "../" * page.url.count("/")
    text = (_lab_banner(name, up) + '\n\n<h2 id="claims-and-evidence">Claims and evidence</h2>\n\n'
            + evidence_block(proof, name))  # fmt: skip
    rendered = _markdown.markdown(text, extensions=config["markdown_extensions"], extension_configs=config["mdx_configs"])
    banner, _, tail = rendered.partition("<h2")
    # the banner (how to run it, which run the outputs come from) goes under the lab's title, not above it
    title_end = html_text.find("</h1>")
    cut = title_end + len("</h1>") if title_end >= 0 else 0
    html_text = html_text[:cut] + banner + html_text[cut:] + ("<h2" + tail if tail else "")
    page.toc = _toc_from_html(html_text)
    return html_text


_HEADING = _re.compile(r"<h([1-6])[^>]*\bid=\"([^\"]+)\"[^>]*>(.*?)</h\1>", _re.S)


def _toc_from_html(html_text: str):
    """The page's table of contents from its headings as rendered (inline code kept as text), so that
    headings added here (Claims and evidence) are in it too."""
    from mkdocs.structure.toc import get_toc

    roots: list = []
    stack: list = []
    for level, anchor, inner in _HEADING.findall(html_text):
        text = _re.sub(r"<a class=\"(?:headerlink|anchor-link)\".*?</a>", "", inner, flags=_re.S)
        text = _re.sub(r"<[^>]+>", "", text).replace("¶", "").strip()
        token = {"level": int(level), "id": anchor, "name": text, "children": []}
        while stack and stack[-1]["level"] >= token["level"]:
            stack.pop()
        (stack[-1]["children"] if stack else roots).append(token)
        stack.append(token)
    return get_toc(roots)


def self_contained(output, page, config):
    if not lab_name(page.file):
        return output
    output = _EXTERNAL_SCRIPT.sub("", output)  # nothing on a lab page is requested from another host
    styles = _STYLE.findall(output)
    if styles:
        css_path = Path(config["site_dir"]) / _NOTEBOOK_CSS
        css_path.parent.mkdir(parents=True, exist_ok=True)
        css_path.write_text("\n".join(styles))  # the same for every lab
        output = _STYLE.sub("", output)
        link = f'<link rel="stylesheet" href="{"../" * page.url.count("/")}{_NOTEBOOK_CSS}">'
        output = output.replace("</head>", link + "\n</head>", 1)
    return output
