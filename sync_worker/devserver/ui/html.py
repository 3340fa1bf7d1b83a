"""HTML building blocks of the dev server UI: escaping, the page layout, tables, payloads.

Every value that reaches a page goes through :func:`esc` (or :func:`attr`), so a workflow id,
a signal name or a decoded payload of ``<script>`` shows as text. Markup is assembled from
small functions rather than a template engine: the pages are few and plain, and the core
install stays free of dependencies.
"""

from __future__ import annotations

import base64
import html
import json
from typing import Any, Iterable, List, Optional, Sequence, Tuple
from urllib.parse import quote, urlencode

from ... import payloads

__all__ = ["Html", "attr", "esc", "href", "layout", "link", "payload_block", "quote_id", "table"]


class Html(str):
    """Markup that is already safe; plain ``str`` values are escaped when joined into a page."""


def esc(value: Any) -> Html:
    if isinstance(value, Html):
        return value
    return Html(html.escape("" if value is None else str(value), quote=True))


def attr(value: Any) -> Html:
    return esc(value)


def join(parts: Iterable[Any]) -> Html:
    return Html("".join(esc(p) for p in parts))


def quote_id(value: str) -> str:
    """An id as one URL path segment."""
    return quote(value, safe="")


def href(path: str, **query: Any) -> str:
    kept = {k: v for k, v in query.items() if v not in (None, "")}
    return path + ("?" + urlencode(kept) if kept else "")


def link(path: str, text: Any, **query: Any) -> Html:
    return Html(f'<a href="{attr(href(path, **query))}">{esc(text)}</a>')


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]], *, empty: str = "Nothing here yet.",
          css: str = "") -> Html:
    body = "".join("<tr>" + "".join(f"<td>{show(value)}</td>" for value in row) + "</tr>" for row in rows)
    if not body:
        return Html(f'<p class="empty">{esc(empty)}</p>')
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    return Html(f'<table class="{attr(css)}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>')


def _jsonable(value: Any) -> Any:
    if isinstance(value, bytes):
        return {"bytes(base64)": base64.b64encode(value).decode("ascii")}
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    return value


def decoded_text(payload: Any, *, codec: Optional[str] = "avro", arguments: bool = False) -> Tuple[str, bool]:
    """``(text, ok)``: a payload envelope decoded from Avro and shown as indented JSON."""
    if payload is None:
        return "(none)", True
    try:
        value = payloads.decode_arguments(payload, codec=codec) if arguments else payloads.decode_envelope(
            payload, codec=codec)
    except Exception as error:  # a payload the UI cannot show must not break the page
        return f"undecodable payload: {type(error).__name__}: {error}", False
    return json.dumps(_jsonable(value), indent=2, ensure_ascii=False, sort_keys=True), True


def payload_block(payload: Any, *, codec: Optional[str] = "avro", arguments: bool = False,
                  label: str = "") -> Html:
    text, ok = decoded_text(payload, codec=codec, arguments=arguments)
    css = "payload" if ok else "payload bad"
    title = f'<div class="label">{esc(label)}</div>' if label else ""
    return Html(f'{title}<pre class="{css}">{esc(text)}</pre>')


def show(value: Any) -> Html:
    """One value on a page: markup as it is, objects and lists as compact JSON, the rest as text."""
    if isinstance(value, Html):
        return value
    if isinstance(value, (dict, list)):
        return esc(json.dumps(value, sort_keys=True, ensure_ascii=False, default=str))
    return esc(value)


def kv_list(pairs: Iterable[Tuple[str, Any]]) -> Html:
    items = "".join(f"<dt>{esc(k)}</dt><dd>{show(v)}</dd>" for k, v in pairs)
    return Html(f'<dl class="kv">{items}</dl>')


CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;color:#1d2330;background:#f6f7f9}
header{background:#1f2a44;color:#fff;padding:.6rem 1.2rem;display:flex;gap:1.2rem;align-items:center;flex-wrap:wrap}
header a{color:#cfe0ff;text-decoration:none}header a.on{color:#fff;font-weight:600}
header .brand{font-weight:700;color:#fff;margin-right:.6rem}
header form{margin-left:auto}main{padding:1rem 1.2rem;max-width:1200px}
table{border-collapse:collapse;width:100%;background:#fff;margin:.4rem 0 1rem}
th,td{border-bottom:1px solid #e3e6eb;padding:.35rem .5rem;text-align:left;vertical-align:top}
th{background:#eef1f5;font-weight:600}pre.payload{background:#fff;border:1px solid #e3e6eb;padding:.4rem;
margin:.2rem 0;max-height:18rem;overflow:auto;white-space:pre-wrap;word-break:break-word}
pre.bad{border-color:#d9534f;color:#a12622}.status{padding:.05rem .4rem;border-radius:.3rem;background:#e3e6eb}
.status.completed{background:#d4f3dd}.status.failed,.status.terminated,.status.timed_out{background:#f9d6d5}
.status.running,.status.waiting{background:#dbe8ff}.status.cancelled{background:#f3ead4}
dl.kv{display:grid;grid-template-columns:max-content 1fr;gap:.2rem 1rem;background:#fff;padding:.6rem;
border:1px solid #e3e6eb}dl.kv dt{font-weight:600}dl.kv dd{margin:0;word-break:break-all}
.flash{background:#fff7d6;border:1px solid #e8d48a;padding:.5rem;margin-bottom:.8rem}
.error{background:#f9d6d5;border:1px solid #d9534f;padding:.5rem;margin-bottom:.8rem}
form.inline{display:inline}fieldset{background:#fff;border:1px solid #e3e6eb;margin:.5rem 0}
input[type=text],textarea,select{font:inherit;padding:.2rem .3rem}textarea{width:100%;min-height:4rem}
button{font:inherit;padding:.25rem .7rem;cursor:pointer}.danger{background:#d9534f;color:#fff;border:0}
.timeline li{margin:.3rem 0}.muted{color:#6b7280}.empty{color:#6b7280;font-style:italic}
"""

# Served as /ui/static/app.js (the pages' Content-Security-Policy allows no inline script):
# the namespace switcher submits on change, and the live part of a page (a run that is still
# open) refreshes itself without losing what was typed into the forms around it.
JS = """
(function(){var sw=document.querySelector('#ns-switch select');
if(sw){sw.addEventListener('change',function(){sw.form.submit();});}
var live=document.getElementById('live');if(!live||live.dataset.refresh!=='1')return;
function tick(){fetch(window.location.href,{credentials:'same-origin'}).then(function(r){return r.text();})
.then(function(t){var d=new DOMParser().parseFromString(t,'text/html');var n=d.getElementById('live');
if(n){live.innerHTML=n.innerHTML;live.dataset.refresh=n.dataset.refresh;}
if(live.dataset.refresh==='1')setTimeout(tick,1500);}).catch(function(){setTimeout(tick,3000);});}
setTimeout(tick,1500);})();
"""

NAV: List[Tuple[str, str]] = [("workflows", "Workflows"), ("activities", "Activities"), ("workers", "Workers"),
                              ("task-queues", "Task queues"), ("schedules", "Schedules")]


def layout(title: str, body: Html, *, namespace: str, namespaces: Sequence[str], section: str,
           flash: Optional[str] = None, error: Optional[str] = None, authenticated: bool = True) -> bytes:
    nav = ""
    switcher = ""
    if authenticated:
        nav = "".join(
            f'<a class="{"on" if key == section else ""}" href="/ui/{attr(key)}?namespace={attr(namespace)}">'
            f"{esc(label)}</a>" for key, label in NAV)
        options = "".join(f'<option value="{attr(n)}"{" selected" if n == namespace else ""}>{esc(n)}</option>'
                          for n in namespaces)
        switcher = (f'<form method="get" action="/ui/{attr(section)}" id="ns-switch">'
                    f'<label>Namespace <select name="namespace">{options}</select>'
                    "</label><noscript><button>Go</button></noscript></form>")
    notes = ""
    if flash:
        notes += f'<div class="flash" role="status">{esc(flash)}</div>'
    if error:
        notes += f'<div class="error" role="alert">{esc(error)}</div>'
    page = (
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<title>{esc(title)} · sync-worker dev server</title>"
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        '<link rel="stylesheet" href="/ui/static/app.css"></head>'
        f"<body><header><span class=\"brand\">sync-worker dev server</span>"
        f"{nav}{switcher}</header><main><h1>{esc(title)}</h1>{notes}{body}</main>"
        '<script src="/ui/static/app.js"></script></body></html>'
    )
    return page.encode("utf-8")
