#!/usr/bin/env python3
"""Golden ids for Tandem's tokenizer, made by an independent implementation (Hugging Face transformers
building its tokenizer from the same GGUF files).

Usage: python3 tests/reference/make_tokenizer_golden.py [MODEL_DIR]
MODEL_DIR defaults to $TANDEM_MODEL_DIR or ~/.cache/tandem/models (scripts/fetch-models.sh --all).
Writes tests/golden/tokenizer_<name>.json for each model. Checked with transformers 5.2x.
"""
import json
import os
import sys
from pathlib import Path

from transformers import AutoTokenizer
import transformers

MODELS = {
    "smollm2": "SmolLM2-135M-Instruct.Q4_1.gguf",
    "gemma3": "gemma-3-270m-Q4_K_M.gguf",
}

# The base Gemma-3 270m GGUF carries no chat template; this is the instruction-tuned Gemma 3 template
# (as published with google/gemma-3-*-it and as llama.cpp's tests carry it).
GEMMA3_TEMPLATE = """{{ bos_token }}
{%- if messages[0]['role'] == 'system' -%}
    {%- if messages[0]['content'] is string -%}
        {%- set first_user_prefix = messages[0]['content'] + '\\n\\n' -%}
    {%- else -%}
        {%- set first_user_prefix = messages[0]['content'][0]['text'] + '\\n\\n' -%}
    {%- endif -%}
    {%- set loop_messages = messages[1:] -%}
{%- else -%}
    {%- set first_user_prefix = "" -%}
    {%- set loop_messages = messages -%}
{%- endif -%}
{%- for message in loop_messages -%}
    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}
        {{ raise_exception("Conversation roles must alternate user/assistant/user/assistant/...") }}
    {%- endif -%}
    {%- if (message['role'] == 'assistant') -%}
        {%- set role = "model" -%}
    {%- else -%}
        {%- set role = message['role'] -%}
    {%- endif -%}
    {{ '<start_of_turn>' + role + '\\n' + (first_user_prefix if loop.first else "") }}
    {%- if message['content'] is string -%}
        {{ message['content'] | trim }}
    {%- elif message['content'] is iterable -%}
        {%- for item in message['content'] -%}
            {%- if item['type'] == 'image' -%}
                {{ '<start_of_image>' }}
            {%- elif item['type'] == 'text' -%}
                {{ item['text'] | trim }}
            {%- endif -%}
        {%- endfor -%}
    {%- else -%}
        {{ raise_exception("Invalid content type") }}
    {%- endif -%}
    {{ '<end_of_turn>\\n' }}
{%- endfor -%}
{%- if add_generation_prompt -%}
    {{'<start_of_turn>model\\n'}}
{%- endif -%}
"""

TEXTS = [
    "Hello world",
    "What is the capital of France?",
    "The quick brown fox jumps over the lazy dog.",
    " leading space",
    "   three leading spaces",
    "trailing spaces   ",
    "multiple    spaces\tand\ttabs",
    "Numbers: 1234567, 3.14159, -42 and 1,000,000.",
    "Café, naïve, résumé, Ångström, façade.",
    "Ünïcödé àccénts: éèêë ñ ç ß ø",
    "日本語のテキストです。中文文本。",
    "한국어 텍스트",
    "Emoji: 🎉🚀 👍🏽 ❤️ 👨‍👩‍👧",
    "def foo(x):\n\treturn x * 2\n\n\nprint(foo(21))",
    "    indented code\n        more indent\n",
    "line1\nline2\r\nline3\n\n\n\nline4",
    "It's, we're, they've, I'm, you'll, he'd. DON'T SHOUT",
    "https://example.com/path?query=1&b=2#frag",
    "<html><body><b>bold</b></body></html>",
    "{\"key\": [1, 2, 3], \"nested\": {\"a\": null}}",
    "a",
    " ",
    "\n",
    "",
    "x" * 50 + " " + "ab" * 20,
    "Ελληνικά και русский текст",
    "مرحبا بالعالم",
    "<|im_start|>user\nhi<|im_end|>",
    "<start_of_turn>user\nWhat is 2+2?<end_of_turn>\n<start_of_turn>model\n",
    "<|endoftext|>tail",
    "mixed<|im_end|>text<bos>and<eos>more",
    "$100 + 50% = ~{}[]|\\^<=>",
]

CONVERSATIONS = [
    [{"role": "user", "content": "What is the capital of France?"}],
    [
        {"role": "system", "content": "You are a concise assistant."},
        {"role": "user", "content": "Name three primary colors."},
    ],
    [
        {"role": "user", "content": "Hi!"},
        {"role": "assistant", "content": "Hello! How can I help you today?"},
        {"role": "user", "content": "Tell me a joke about café owners 🎉."},
    ],
]


# transformers' GGUF converter gives SmolLM2 (pre "smollm") only the GPT-2 ByteLevel regex, dropping the
# individual-digit split that both the original tokenizer.json (Digits(individual_digits=True) before
# ByteLevel) and llama.cpp ("smollm" = "\\p{N}" then the GPT-2 regex) apply. The two differ only where
# whitespace precedes a digit ("    7": "   " + " " + "7" vs "    " + "7"). Tandem follows the
# original tokenizer and llama.cpp; these cases are checked against transformers with the original
# pre-tokenizer restored.
DIGIT_CASES = ["    7.", "\n\n7", "x  42", "Price:   1234567", "a\t\t3 b"]


def original_smollm_pretokenizer(tok):
    from tokenizers import pre_tokenizers as pt

    tok.backend_tokenizer.pre_tokenizer = pt.Sequence(
        [pt.Digits(individual_digits=True), pt.ByteLevel(add_prefix_space=False, use_regex=True)]
    )


def main():
    model_dir = Path(
        sys.argv[1] if len(sys.argv) > 1 else os.environ.get("TANDEM_MODEL_DIR", "~/.cache/tandem/models")
    ).expanduser()
    out_dir = Path(__file__).resolve().parent.parent / "golden"
    out_dir.mkdir(parents=True, exist_ok=True)
    for name, fname in MODELS.items():
        tok = AutoTokenizer.from_pretrained(str(model_dir), gguf_file=fname)
        template = tok.chat_template if tok.chat_template else GEMMA3_TEMPLATE
        texts = []
        for t in TEXTS:
            with_special = tok(t, add_special_tokens=True)["input_ids"]
            without = tok(t, add_special_tokens=False)["input_ids"]
            texts.append(
                {
                    "text": t,
                    "ids_with_special": with_special,
                    "ids_no_special": without,
                    "decoded_skip_special": tok.decode(without, skip_special_tokens=True),
                }
            )
        chats = []
        for conv in CONVERSATIONS:
            rendered = tok.apply_chat_template(conv, chat_template=template, tokenize=False, add_generation_prompt=True)
            ids = tok.apply_chat_template(conv, chat_template=template, tokenize=True, add_generation_prompt=True)
            if isinstance(ids, dict) or hasattr(ids, "keys"):
                ids = ids["input_ids"]
            chats.append({"messages": conv, "rendered": rendered, "ids": list(ids)})
        digit_cases = []
        if name == "smollm2":
            original_smollm_pretokenizer(tok)
            digit_cases = [
                {"text": t, "ids_no_special": tok(t, add_special_tokens=False)["input_ids"]} for t in DIGIT_CASES
            ]
        golden = {
            "model_file": fname,
            "generator": f"transformers {transformers.__version__}, AutoTokenizer.from_pretrained(dir, gguf_file=...)",
            "bos_token": tok.bos_token,
            "eos_token": tok.eos_token,
            "chat_template": template,
            "chat_template_from_gguf": bool(tok.chat_template),
            "texts": texts,
            "chats": chats,
            "original_pretokenizer_cases": digit_cases,
        }
        path = out_dir / f"tokenizer_{name}.json"
        path.write_text(json.dumps(golden, ensure_ascii=False, indent=1) + "\n")
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
