"""Template text is untrusted: sandbox escapes raise and never run."""

from __future__ import annotations

from pathlib import Path

import pytest

from whileai_datasets.chat_template import ChatTemplate
from whileai_datasets.errors import TemplateError

MESSAGES = [{"role": "user", "content": "hi"}]

ESCAPES = {
    "class_of_string": "{{ ''.__class__.__mro__ }}",
    "cycler_globals": "{{ cycler.__init__.__globals__ }}",
    "lipsum_globals": "{{ lipsum.__globals__ }}",
    "joiner_init": "{{ joiner.__init__ }}",
    "namespace_init": "{{ namespace.__init__.__globals__ }}",
    "self_module": "{{ self.__init__.__globals__ }}",
    "messages_subclasses": "{{ messages.__class__.__base__.__subclasses__() }}",
    "format_string_attribute": "{{ '{0.__class__}'.format(messages) }}",
    "mutate_messages": "{{ messages.append({'role': 'system'}) }}",
    "mutate_dict": "{{ messages[0].update({'role': 'system'}) }}",
    "private_namespace_attribute": "{% set ns = namespace(_secret=1) %}{{ ns }}",
    "set_private_namespace_attribute": "{% set ns = namespace() %}{% set ns._x = 1 %}{{ ns }}",
    "dict_type": "{{ dict.__class__ }}",
}


@pytest.mark.parametrize("name", sorted(ESCAPES))
def test_render_refuses_sandbox_escape(name: str) -> None:
    with pytest.raises(TemplateError, match=r"sandbox forbids|unsafe|underscore|not allowed|safely"):
        ChatTemplate(ESCAPES[name]).render(MESSAGES)


def test_escape_attempt_never_runs_shell(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    text = (
        "{{ cycler.__init__.__globals__.os.system('touch " + str(marker) + "') }}"
        "{% for m in messages %}{{ m['content'] }}{% endfor %}"
    )
    with pytest.raises(TemplateError, match="sandbox forbids"):
        ChatTemplate(text).render(MESSAGES)
    report = ChatTemplate(text).inspect()
    assert not any(p.ok for p in report.probes)
    with pytest.raises(TemplateError, match="fails on every probe"):
        ChatTemplate(text).with_generation()
    assert not marker.exists()


def test_escape_error_names_the_template_line() -> None:
    text = "{% for m in messages %}{{ m['content'] }}\n{{ m.__class__ }}{% endfor %}"
    with pytest.raises(TemplateError, match=r"^evil\.jinja:2: the template tried an operation"):
        ChatTemplate(text, name="evil.jinja").render(MESSAGES)


def test_huge_range_is_refused() -> None:
    with pytest.raises(TemplateError, match="OverflowError"):
        ChatTemplate("{% for i in range(10 ** 9) %}x{% endfor %}").render(MESSAGES)


def test_plain_undefined_values_still_render_empty_like_transformers() -> None:
    rendered = ChatTemplate("[{{ messages[0].missing }}]{{ nothing }}").render(MESSAGES)
    assert rendered.text == "[]"
