"""What :class:`~sync_worker.host.WorkerOptions` and :class:`~sync_worker.host.ClientOptions` share:
validation of every field on construction, and reading them from keyword arguments, a settings
mapping (with the setting names each door already uses) or the environment.

Precedence is the caller's: each reader takes a ``base`` (what lower-precedence sources gave)
and returns it with its own values applied, e.g.
``WorkerOptions.from_mapping(flags, base=WorkerOptions.from_env())``.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any, ClassVar, Collection, Dict, List, Mapping, Optional, Type, TypeVar

from .errors import OptionsError, UnknownOption
from .values import Invalid, Rule

__all__ = ["OptionsBase"]

Opts = TypeVar("Opts", bound="OptionsBase")


def check(rule: Rule, key: str, value: Any, *, source: Optional[str] = None, from_text: bool = False) -> Any:
    """``value`` converted by ``rule``, or :class:`OptionsError` naming ``key`` (and ``source``)."""
    try:
        return rule(value, from_text)
    except Invalid as invalid:
        raise OptionsError(key, value, invalid.requirement, source=source, show_value=invalid.show_value) from None


class OptionsBase:
    """Base of the frozen option dataclasses (subclasses are ``@dataclass(frozen=True)``)."""

    __dataclass_fields__: ClassVar[Dict[str, Any]]
    #: field → the rule its value must pass (fields without one hold objects, taken as given).
    RULES: ClassVar[Mapping[str, Rule]] = {}
    #: setting name → field: the names a settings mapping may use, besides the field names.
    SETTING_NAMES: ClassVar[Mapping[str, str]] = {}
    #: environment variable → field.
    ENVIRONMENT: ClassVar[Mapping[str, str]] = {}

    def __post_init__(self) -> None:
        for field, rule in self.RULES.items():
            object.__setattr__(self, field, check(rule, field, getattr(self, field)))

    # -- readers ----------------------------------------------------------------------------------

    @classmethod
    def from_kwargs(cls: Type[Opts], **kwargs: Any) -> Opts:
        """From keyword arguments named as the fields; an unknown name is :class:`UnknownOption`."""
        return cls().replace(**kwargs)

    @classmethod
    def from_mapping(cls: Type[Opts], mapping: Mapping[str, Any], *, base: Optional[Opts] = None,
                     ignore: Collection[str] = (), source: Optional[str] = None) -> Opts:
        """From a settings mapping: field names or :attr:`SETTING_NAMES`; values in ``mapping``
        replace those of ``base`` (default: the defaults). Keys in ``ignore`` belong to someone
        else and are skipped; any other unknown key is :class:`UnknownOption`. ``source`` names the
        mapping in errors (``"settings.SYNC_WORKER"`` → ``settings.SYNC_WORKER['POOL']``)."""
        values: Dict[str, Any] = {}
        for key, value in mapping.items():
            if key in ignore:
                continue
            field = cls.field_for(key)
            where = f"{source}[{key!r}]" if source else None
            if field is None:
                raise UnknownOption(str(key), value, cls.known_names(), source=source)
            rule = cls.RULES.get(field)
            values[field] = value if rule is None else check(rule, str(key), value, source=where)
        return (base if base is not None else cls()).replace(**values)

    @classmethod
    def from_env(cls: Type[Opts], environ: Optional[Mapping[str, str]] = None, *, base: Optional[Opts] = None,
                 **given: Any) -> Opts:
        """From the environment (:attr:`ENVIRONMENT`; an empty variable counts as unset) over
        ``base``; ``given`` (field names: a command line's flags; None or empty for a flag not given) wins."""
        env = os.environ if environ is None else environ
        values: Dict[str, Any] = {}
        for variable, field in cls.ENVIRONMENT.items():
            raw = env.get(variable)
            if raw is None or raw == "":
                continue
            values[field] = check(cls.RULES[field], variable, raw, source="environment", from_text=True)
        values.update({key: value for key, value in given.items() if value is not None and value != ""})
        return (base if base is not None else cls()).replace(**values)

    # -- names --------------------------------------------------------------------------------------

    @classmethod
    def field_for(cls, key: str) -> Optional[str]:
        """The field a setting name stands for (a field name, or one of :attr:`SETTING_NAMES`)."""
        if key in cls.SETTING_NAMES:
            return cls.SETTING_NAMES[key]
        return key if key in cls.field_names() else None

    @classmethod
    def field_names(cls) -> List[str]:
        return [field.name for field in dataclasses.fields(cls)]

    @classmethod
    def known_names(cls) -> List[str]:
        """Every name a settings mapping may use."""
        return sorted({*cls.field_names(), *cls.SETTING_NAMES})

    # -- changing ---------------------------------------------------------------------------------

    def replace(self: Opts, **changes: Any) -> Opts:
        """A copy with ``changes`` (field names), validated like a new one."""
        known = self.field_names()
        for key, value in changes.items():
            if key not in known:
                raise UnknownOption(key, value, known)
        return dataclasses.replace(self, **changes)

    def as_dict(self) -> Dict[str, Any]:
        """The fields and their values (the keyword arguments of what the options build)."""
        return {field.name: getattr(self, field.name) for field in dataclasses.fields(self)}
