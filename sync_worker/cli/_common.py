"""What every operator command shares: connection options, JSON option parsing, output, exit codes.

Connection: ``--server-url`` (aliases ``--server``, ``-s``) / ``--token`` / ``--namespace``, else
the environment variables ``DURABLE_WORKFLOW_SERVER_URL``, ``DURABLE_WORKFLOW_AUTH_TOKEN`` and
``DURABLE_WORKFLOW_NAMESPACE`` (the Durable Workflow CLI's names, read by
:meth:`sync_worker.host.ClientOptions.from_env`), else ``http://127.0.0.1:7233`` and ``default``.

Exit codes (those of the Durable Workflow CLI, so scripts can move between the two):

==  =========================================================================
0   success
1   failure: the command ran but did not succeed (a workflow failed, a refused command)
2   invalid usage or a request the server refused as invalid (HTTP 400/409/422...)
3   network: the server could not be reached
4   authentication or authorization (HTTP 401/403)
5   not found (HTTP 404)
6   server error (HTTP 5xx)
7   timed out
==  =========================================================================
"""

from __future__ import annotations

import functools
import json
import sys
from typing import Any, Callable, Dict, Iterable, List, Mapping, NoReturn, Optional, Sequence, TypeVar

import click

from .. import errors
from ..host.client_options import AUTH_TOKEN_ENV, DEFAULT_SERVER_URL, NAMESPACE_ENV, SERVER_URL_ENV, ClientOptions
from ..host.errors import OptionsError
from .params import namespace_option, server_url_option, token_option

EXIT_OK, EXIT_FAILURE, EXIT_INVALID, EXIT_NETWORK, EXIT_AUTH, EXIT_NOT_FOUND, EXIT_SERVER, EXIT_TIMEOUT = range(8)

DEFAULT_SERVER = DEFAULT_SERVER_URL

# the list of a listing response, printed one object per line by ``--output jsonl``
_LIST_KEYS = ("workflows", "runs", "events", "schedules", "namespaces", "activities", "workers", "task_queues",
              "build_ids")

F = TypeVar("F", bound=Callable[..., Any])


class Context:
    """The resolved connection and output mode of one command."""

    def __init__(self, server: str, token: Optional[str], namespace: str, as_json: bool,
                 jsonl: bool = False) -> None:
        self.server = server
        self.token = token
        self.namespace = namespace
        self.as_json = as_json or jsonl
        self.jsonl = jsonl
        self._client: Any = None

    @property
    def client(self) -> Any:
        if self._client is None:
            options = ClientOptions(server_url=self.server, token=self.token, namespace=self.namespace,
                                    transport_retries=2)
            self._client = options.build_client()
        return self._client

    def call(self, method: str, path: str, *, body: Any = None, params: Optional[Mapping[str, Any]] = None) -> Any:
        """One request with the exact body given; errors become exit codes."""
        return self.guard(lambda: self.client.request(method, path, body=body, params=params))

    def guard(self, fn: Callable[[], Any]) -> Any:
        try:
            return fn()
        except errors.DurableWorkflowError as exc:
            fail(self, exc)
        except TimeoutError as exc:
            fail(self, exc, code=EXIT_TIMEOUT)

    def emit(self, value: Any, human: Optional[Callable[[Any], None]] = None) -> None:
        """``--json``: the JSON document on stdout; otherwise the human view (``human``, else key: value)."""
        if self.jsonl:
            items = next((value[key] for key in _LIST_KEYS if isinstance(value, dict)
                          and isinstance(value.get(key), list)), None)
            for item in items if items is not None else [value]:
                click.echo(json.dumps(item, ensure_ascii=False, separators=(",", ":"), default=str))
            return
        if self.as_json or human is None:
            if self.as_json:
                click.echo(json.dumps(value, indent=2, ensure_ascii=False, default=str))
            else:
                show_mapping(value)
            return
        human(value)


def exit_code_for(exc: BaseException) -> int:
    """The documented exit code of an error."""
    if isinstance(exc, (errors.Unauthorized, errors.Forbidden)):
        return EXIT_AUTH
    if isinstance(exc, errors.NotFound):
        return EXIT_NOT_FOUND
    if isinstance(exc, errors.TransportError):
        return EXIT_TIMEOUT if getattr(exc, "timeout", False) else EXIT_NETWORK
    if isinstance(exc, TimeoutError):
        return EXIT_TIMEOUT
    if isinstance(exc, errors.ServerError):
        if exc.status == 408:
            return EXIT_TIMEOUT
        if exc.status >= 500:
            return EXIT_SERVER
        if exc.status >= 400:
            return EXIT_INVALID
    return EXIT_FAILURE


def fail(ctx: Optional[Context], exc: BaseException, *, code: Optional[int] = None) -> NoReturn:
    """Report ``exc`` (stderr; with ``--json`` also an error document on stdout) and exit."""
    exit_code = exit_code_for(exc) if code is None else code
    status = getattr(exc, "status", None)
    reason = exc.reason() if isinstance(exc, errors.ServerError) else None
    if ctx is not None and ctx.as_json:
        click.echo(json.dumps({"error": {"type": type(exc).__name__, "message": str(exc), "status": status,
                                         "reason": reason, "exit_code": exit_code}}, indent=2))
    click.echo(f"error: {exc}", err=True)
    sys.exit(exit_code)


def usage(message: str) -> NoReturn:
    raise click.UsageError(message)


def json_option(value: Optional[str], option: str) -> Any:
    """Parse a JSON-valued option (``None`` when absent); bad JSON is a usage error (exit 2)."""
    if value is None or value == "":
        return None
    try:
        return json.loads(value)
    except ValueError as exc:
        usage(f"{option} must be valid JSON: {exc}")


def input_arguments(value: Optional[str], option: str = "--input") -> Optional[List[Any]]:
    """``--input`` as the argument list: a JSON array as is, any other JSON value as one argument."""
    parsed = json_option(value, option)
    if parsed is None and not value:
        return None
    return parsed if isinstance(parsed, list) else [parsed]


def key_values(items: Sequence[str], option: str) -> Optional[Dict[str, str]]:
    """``--search-attr key=value`` (repeatable) as a dict."""
    if not items:
        return None
    out: Dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            usage(f"{option} takes key=value, got {item!r}")
        out[key] = value
    return out


def compact(**fields: Any) -> Dict[str, Any]:
    """The fields that were given, in order (``None`` left out)."""
    return {k: v for k, v in fields.items() if v is not None}


def show_mapping(value: Any, indent: str = "") -> None:
    """A JSON object as aligned ``key: value`` lines (nested objects indented)."""
    if not isinstance(value, dict):
        click.echo(f"{indent}{_cell(value)}")
        return
    width = max((len(str(k)) for k in value), default=0)
    for key, item in value.items():
        if isinstance(item, dict) and item:
            click.echo(f"{indent}{key}:")
            show_mapping(item, indent + "  ")
        else:
            click.echo(f"{indent}{str(key).ljust(width)}  {_cell(item)}")


def show_table(rows: Iterable[Mapping[str, Any]], columns: Sequence[str], *, empty: str = "(none)") -> None:
    """Rows as a plain aligned table with a header line."""
    data = [[_cell(row.get(col)) for col in columns] for row in rows]
    if not data:
        click.echo(empty)
        return
    headers = [col.upper() for col in columns]
    widths = [max(len(headers[i]), *(len(r[i]) for r in data)) for i in range(len(columns))]
    click.echo("  ".join(h.ljust(w) for h, w in zip(headers, widths)).rstrip())
    for row in data:
        click.echo("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
    return str(value)


def command(group: click.Group, name: str, **kwargs: Any) -> Callable[[F], F]:
    """A leaf command of ``group`` with the shared connection and ``--json`` options.

    The wrapped function receives a :class:`Context` first.
    """
    def decorate(fn: F) -> F:
        @functools.wraps(fn)
        def run(server_url: Optional[str], token: Optional[str], namespace: Optional[str], as_json: bool,
                output: Optional[str], **params: Any) -> Any:
            as_json = as_json or output == "json"
            try:
                connection = ClientOptions.from_env(server_url=server_url, token=token, namespace=namespace)
            except OptionsError as exc:
                fail(Context(DEFAULT_SERVER, None, "default", as_json), exc, code=EXIT_INVALID)
            ctx = Context(connection.server_url or DEFAULT_SERVER, connection.token, connection.namespace, as_json,
                          jsonl=output == "jsonl")
            return fn(ctx, **params)

        options = [
            server_url_option(short=True, help=f"Server origin (env {SERVER_URL_ENV}; default {DEFAULT_SERVER}); "
                                               "--server and -s are aliases."),
            token_option(help=f"Bearer token (env {AUTH_TOKEN_ENV})."),
            namespace_option(help=f"Namespace (env {NAMESPACE_ENV}; default 'default')."),
            click.option("--json", "as_json", is_flag=True, help="Print the server's JSON response."),
            click.option("--output", type=click.Choice(["table", "json", "jsonl"]), default=None,
                         help="table (default), json (= --json), jsonl: a listing one object per line."),
        ]
        wrapped: Any = run
        for option in options:
            wrapped = option(wrapped)
        group.command(name, **kwargs)(wrapped)
        return fn
    return decorate
