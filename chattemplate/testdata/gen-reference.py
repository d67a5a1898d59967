#!/usr/bin/env python3
"""Writes the reference renderings the Go tests compare against.

Each case of corpus.json is rendered with Python's Jinja in the environment
transformers' apply_chat_template builds (transformers/utils/
chat_template_utils.py, _compile_jinja_template and render_jinja_template):

  ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                extensions=[..., jinja2.ext.loopcontrols])
  filters["tojson"]          json.dumps(x, ensure_ascii=False, indent=None,
                                        separators=None, sort_keys=False)
  globals["raise_exception"] raises TemplateError(message)
  globals["strftime_now"]    datetime.now().strftime(format); here the
                             corpus's fixed "now", for repeatable output
  render(messages=..., tools=..., documents=None,
         add_generation_prompt=..., **special_tokens_map, **kwargs)

The AssistantTracker extension ({% generation %}) is left out: no template
here uses it. The template is chosen as get_chat_template does: the named
one, else "tool_use" when tools are given and it exists, else "default".
special_tokens_map holds the set (truthy) attributes among bos_token,
eos_token, unk_token, sep_token, pad_token, cls_token, mask_token and
additional_special_tokens, an AddedToken given by its content.

A case without "add_generation_prompt" is rendered both ways:
reference/<name>.txt (False) and reference/<name>+gen.txt (True). A case the
template refuses writes reference/<name>[+gen].raise.txt with the message.

Needs jinja2 >= 3.1 (Debian: apt-get install -y python3-jinja2). Run by hand
from anywhere, then commit reference/:

  python3 chattemplate/testdata/gen-reference.py
"""

import datetime
import json
import os
import shutil

import jinja2
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

HERE = os.path.dirname(os.path.abspath(__file__))
TOKEN_ATTRS = ["bos_token", "eos_token", "unk_token", "sep_token", "pad_token",
               "cls_token", "mask_token", "additional_special_tokens"]


def environment(now):
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent,
                          separators=separators, sort_keys=sort_keys)

    def strftime_now(format):
        return now.strftime(format)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def content(token):
    return token["content"] if isinstance(token, dict) else token


def load_config(env, name):
    with open(os.path.join(HERE, name, "tokenizer_config.json"), encoding="utf-8") as f:
        cfg = json.load(f)
    ct = cfg["chat_template"]
    if isinstance(ct, list):
        sources = {t["name"]: t["template"] for t in ct}
    else:
        sources = {"default": ct}
    tokens = {}
    for attr in TOKEN_ATTRS:
        value = cfg.get(attr)
        if attr == "additional_special_tokens" and value:
            value = [content(t) for t in value]
        elif value is not None:
            value = content(value)
        if value:
            tokens[attr] = value
    return {n: env.from_string(s) for n, s in sources.items()}, tokens


def pick(templates, name, tools):
    if name:
        return templates[name]
    if tools is not None and "tool_use" in templates:
        return templates["tool_use"]
    return templates["default"]


def main():
    with open(os.path.join(HERE, "corpus.json"), encoding="utf-8") as f:
        corpus = json.load(f)
    env = environment(datetime.datetime.fromisoformat(corpus["now"]))
    configs = {}
    out_dir = os.path.join(HERE, "reference")
    shutil.rmtree(out_dir, ignore_errors=True)
    os.makedirs(out_dir)
    for case in corpus["cases"]:
        if case["config"] not in configs:
            configs[case["config"]] = load_config(env, case["config"])
        templates, tokens = configs[case["config"]]
        template = pick(templates, case.get("template"), case.get("tools"))
        kwargs = dict(tokens)
        kwargs.update(case.get("kwargs", {}))
        if "enable_thinking" in case:
            kwargs["enable_thinking"] = case["enable_thinking"]
        if "add_generation_prompt" in case:
            variants = [case["add_generation_prompt"]]
        else:
            variants = [False, True]
        for agp in variants:
            stem = case["name"] + ("+gen" if agp else "")
            try:
                text = template.render(messages=case["messages"], tools=case.get("tools"),
                                       documents=None, add_generation_prompt=agp, **kwargs)
                path = os.path.join(out_dir, stem + ".txt")
            except jinja2.exceptions.TemplateError as e:
                text = str(e)
                path = os.path.join(out_dir, stem + ".raise.txt")
            with open(path, "w", encoding="utf-8", newline="") as f:
                f.write(text)
            print(os.path.relpath(path, HERE), len(text.encode("utf-8")), "bytes")


if __name__ == "__main__":
    main()
