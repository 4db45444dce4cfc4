"""`raycompo.run`, `raycompo.tune` and `raycompo.plot` are the command lines' modules and
the API's functions at once: seen from Python (inspect, help, IDEs, notebooks) they carry
the function's signature and docstring; `python -m raycompo.X --help` still prints the
command line's own text."""

from __future__ import annotations

import inspect
import pydoc
import subprocess
import sys

import pytest

import raycompo

CASES = [("run", "raycompo.api", "run"), ("tune", "raycompo.tune.api", "tune"), ("plot", "raycompo.plot", "plot")]


def function(module: str, name: str):
    import importlib

    return getattr(importlib.import_module(module), name)


@pytest.mark.parametrize("public,module,name", CASES)
def test_the_signature_is_the_functions(public, module, name):
    fn = function(module, name)
    callable_ = getattr(raycompo, public)
    assert inspect.signature(callable_).parameters == inspect.signature(fn).parameters
    assert inspect.signature(callable_).return_annotation == inspect.signature(fn).return_annotation
    assert inspect.unwrap(callable_) is fn


@pytest.mark.parametrize("public,module,name", CASES)
def test_help_prints_the_signature_and_the_docstring(public, module, name):
    fn = function(module, name)
    text = pydoc.render_doc(getattr(raycompo, public), renderer=pydoc.plaintext)
    first = inspect.getdoc(fn).splitlines()[0]
    assert first in text
    assert f"raycompo.{public}{inspect.signature(fn)}" in text  # the call as the user writes it
    assert "--help" in text  # and where the command line is


def test_the_module_behind_the_command_line_is_unchanged():
    import raycompo.run as module

    assert callable(module) and module is raycompo.run
    assert module.build_parser().description.startswith("Run one experiment.")  # its own docstring, not the function's
    assert module.parse_sets(["rounds=2"]) == {"rounds": 2}


def test_python_m_run_help_still_works():
    out = subprocess.run([sys.executable, "-m", "raycompo.run", "--help"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("usage: python -m raycompo.run") and "Run one experiment." in out.stdout
    assert "Run one federated experiment and return" not in out.stdout
