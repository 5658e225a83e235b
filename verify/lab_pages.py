"""Lab pages: docs/labs/*.py notebooks (jupytext percent format), rendered by mkdocs-jupyter.

The .py is the source; `pytest verify` keeps the executed notebook in .verify/labs/. A lab page shows
that executed copy when there is one, else the bare source and the command that runs it; then the
evidence of its claims, as a question page does. Called from verify/site_hooks.py.
"""

from __future__ import annotations

import json
import re as _re
from pathlib import Path

import markdown as _markdown

from verify import labs as _labs

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


def use_executed_copies(files):
    """A lab with an executed copy from `pytest verify` is rendered from that copy."""
    for file in files:
        name = lab_name(file)
        executed = _labs.EXECUTED_DIR / f"{name}.ipynb" if name else None
        if executed is not None and executed.exists():
            # mkdocs-jupyter's NotebookFile wraps the File (`.file`); abs_src_path is a cached
            # property of each, so set it on both
            for layer in {id(file): file, id(getattr(file, "file", file)): getattr(file, "file", file)}.values():
                layer.abs_src_path = str(executed)
    return files


def _lab_banner(name: str) -> str:
    executed = _labs.EXECUTED_DIR / f"{name}.ipynb"
    source = f"docs/labs/{name}.py"
    how = (f"Open it in Jupyter with jupytext (`jupyter lab`, then *Open With → Notebook* on `{source}`), "
           f"or run and judge it: `python -m pytest verify -k {name}`.")  # fmt: skip
    if executed.exists():
        run = json.loads(executed.read_text()).get("metadata", {}).get("verify", {})
        title = "Outputs of the latest `pytest verify` run on this machine"
        body = (f"Executed {run.get('date', '?')} in {run.get('seconds', '?')} s, status **{run.get('status', '?')}**. "
                f"Source: `{source}`. {how}")  # fmt: skip
        return f'!!! info "{title}"\n    {body}'
    return f'!!! info "Not run on this machine yet: the source without outputs"\n    {how}'


def lab_page_content(html_text, page, config, evidence_block):
    name = lab_name(page.file)
    if not name:
        return html_text
    proof = _labs.read_lab(_labs.LABS_DIR / f"{name}.py")
    text = _lab_banner(name) + "\n\n## Claims and evidence\n\n" + evidence_block(proof.snippet, name, proof.claims)
    rendered = _markdown.markdown(text, extensions=config["markdown_extensions"], extension_configs=config["mdx_configs"])
    head, _, tail = rendered.partition("<h2")
    return head + html_text + ("<h2" + tail if tail else "")


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
