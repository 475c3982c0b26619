"""Reference chat-template rendering: transformers' own render_jinja_template (the function
apply_chat_template calls), with the inputs prepared as apply_chat_template prepares them
(_normalize_chat_messages; special tokens passed as bos_token / eos_token keyword variables).

strftime_now() in transformers reads datetime.now(); for reproducible output the module's
`datetime` is replaced by one whose now() is SOURCE_DATE_EPOCH in UTC, which is what celer
uses when SOURCE_DATE_EPOCH is set."""

from __future__ import annotations

import datetime as _dt

from transformers.utils import chat_template_utils as ctu


class _FixedDatetime(_dt.datetime):
    epoch = 0

    @classmethod
    def now(cls, tz=None):  # noqa: D401 - same signature as datetime.now
        return _dt.datetime.fromtimestamp(cls.epoch, _dt.timezone.utc).replace(tzinfo=None)


def set_epoch(epoch: int) -> None:
    _FixedDatetime.epoch = epoch
    ctu.datetime = _FixedDatetime
    ctu._cached_compile_jinja_template.cache_clear() if hasattr(ctu._cached_compile_jinja_template, "cache_clear") else None
    ctu._compile_jinja_template.cache_clear()


def render(template: str, messages, tools=None, add_generation_prompt=True, bos_token=None, eos_token=None,
           extra=None) -> str:
    """The rendered prompt; raises whatever jinja2 / transformers raise."""
    kwargs = {}
    if bos_token is not None:
        kwargs["bos_token"] = bos_token
    if eos_token is not None:
        kwargs["eos_token"] = eos_token
    kwargs.update(extra or {})
    chat = ctu._normalize_chat_messages(messages)
    rendered, _ = ctu.render_jinja_template(
        conversations=[chat], tools=tools, chat_template=template, add_generation_prompt=add_generation_prompt, **kwargs
    )
    return rendered[0]
