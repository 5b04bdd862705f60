"""`tandem serve` through the official `openai` client (and raw HTTP where the client cannot
send what is tested): replies streamed and whole, stop strings, max_tokens, seeds, and every
error case with its status and OpenAI's error shape.

Usage: client.py BASE_URL API_KEY CTX. The server runs the default model (SmolLM2-135M-Instruct)
with --api-key API_KEY -c CTX --parallel 2 --queue 0.
"""

import json
import re
import sys
import time
import urllib.error
import urllib.request

import openai

base, key, ctx = sys.argv[1], sys.argv[2], int(sys.argv[3])
client = openai.OpenAI(base_url=base + "/v1", api_key=key, max_retries=0, timeout=600)
model = client.models.list().data[0].id
question = [{"role": "user", "content": "What is the capital of France?"}]
answer = "The capital of France is Paris."


def raw(method, path, body=None, key=key):
    """(status, parsed JSON body) of a request sent without the client."""
    req = urllib.request.Request(base + path, data=body, method=method)
    if key:
        req.add_header("Authorization", "Bearer " + key)
    req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=600) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def error_of(status, body, want_status):
    """The `error` object of an error reply, checked for OpenAI's shape."""
    assert status == want_status, (status, body)
    e = json.loads(body)["error"]
    assert set(e) == {"message", "type", "param", "code"}, e
    return e


def chat(**kw):
    return client.chat.completions.create(model=model, messages=question, temperature=0, **kw)


def streamed(**kw):
    """(text, finish_reason, usage) of a streamed chat reply."""
    text, finish, usage = "", None, None
    for chunk in chat(stream=True, stream_options={"include_usage": True}, **kw):
        if chunk.usage is not None:
            usage = chunk.usage
        for c in chunk.choices:
            assert finish is None, "a chunk after the last one"
            text += c.delta.content or ""
            finish = c.finish_reason or finish
    return text, finish, usage


# Whole and streamed replies agree, with their usage.
whole = chat()
assert whole.choices[0].message.content == answer, whole
assert whole.choices[0].finish_reason == "stop"
assert whole.usage.completion_tokens > 0 and whole.usage.prompt_tokens > 0
text, finish, usage = streamed()
assert (text, finish) == (answer, "stop"), (text, finish)
assert usage.completion_tokens == whole.usage.completion_tokens, usage
assert usage.prompt_tokens == whole.usage.prompt_tokens, usage

# max_tokens and max_completion_tokens end the reply at the budget.
short = chat(max_tokens=3)
assert short.choices[0].finish_reason == "length" and short.usage.completion_tokens == 3, short
assert answer.startswith(short.choices[0].message.content), short
assert chat(max_completion_tokens=3).choices[0].message.content == short.choices[0].message.content
text, finish, usage = streamed(max_tokens=3)
assert (finish, usage.completion_tokens) == ("length", 3), (finish, usage)

# Stop strings: the text before the first one, whole or streamed, and never the string itself.
got = chat(stop=" Paris").choices[0]
assert (got.message.content, got.finish_reason) == ("The capital of France is", "stop"), got
assert streamed(stop=["xyz", "France"])[:2] == ("The capital of ", "stop")

# The text endpoint, whole (OpenAI's default budget of 16 tokens) and streamed.
prompt = "The capital of France is"
c16 = client.completions.create(model=model, prompt=prompt, temperature=0)
assert c16.choices[0].finish_reason == "length" and c16.usage.completion_tokens == 16, c16
parts = client.completions.create(model=model, prompt=prompt, max_tokens=5, temperature=0, stream=True)
assert c16.choices[0].text.startswith("".join(p.choices[0].text for p in parts))

# A seed makes sampling repeat; other seeds give other streams.
sampled = lambda seed: client.completions.create(
    model=model, prompt="Once upon a time", max_tokens=4, temperature=1.0, seed=seed
).choices[0].text
assert sampled(7) == sampled(7)
assert len({sampled(s) for s in range(3)}) > 1

# Errors: status, shape, type, param and code.
try:
    client.chat.completions.create(model="gpt-4o", messages=question)
    raise AssertionError("an unknown model was served")
except openai.NotFoundError as e:
    assert e.status_code == 404 and e.code == "model_not_found" and "gpt-4o" in e.message, e

long = [{"role": "user", "content": "word " * (2 * ctx)}]
try:
    client.chat.completions.create(model=model, messages=long)
    raise AssertionError("a prompt longer than the context was accepted")
except openai.BadRequestError as e:
    assert e.code == "context_length_exceeded" and e.param == "messages", e
    n = int(re.search(r"the prompt is (\d+) tokens", e.message).group(1))
    assert f"context length is {ctx} tokens" in e.message and n > ctx, e.message

for bad in [{"n": 2}, {"temperature": 3}, {"max_tokens": 0}]:
    try:
        client.chat.completions.create(model=model, messages=question, **bad)
        raise AssertionError(f"{bad} was accepted")
    except openai.BadRequestError as e:
        assert e.param == next(iter(bad)), (bad, e)

e = error_of(*raw("POST", "/v1/chat/completions", b"{not json"), 400)
assert e["type"] == "invalid_request_error" and "not valid" in e["message"], e
e = error_of(*raw("POST", "/v1/chat/completions", json.dumps({"messages": []}).encode()), 400)
assert e["param"] == "messages", e

try:
    openai.OpenAI(base_url=base + "/v1", api_key="wrong", max_retries=0).models.list()
    raise AssertionError("a wrong key was let in")
except openai.AuthenticationError as e:
    assert e.status_code == 401 and e.code == "invalid_api_key", e
e = error_of(*raw("GET", "/v1/models", key=None), 401)
assert "No API key" in e["message"], e
assert raw("GET", "/health", key=None)[0] == 200

# Two slots busy and no queue: a third request is told the server is full (503). Then both
# clients leave mid-reply, and their generations stop.
metrics = lambda: raw("GET", "/metrics")[1].decode()
value = lambda name: float(re.search(rf"^{name} (\S+)$", metrics(), re.M).group(1))
full = value('tandem_requests_total{status="503"}') if "503" in metrics() else 0
long_chat = [{"role": "user", "content": "Write a long story about a dragon."}]
streams = [
    client.chat.completions.create(model=model, messages=long_chat, max_tokens=2000, stream=True)
    for _ in range(2)
]
for s in streams:
    it = iter(s)
    next(it), next(it)  # the role, then the first text: the reply is generating
try:
    chat()
    raise AssertionError("a request past the slots and the queue was accepted")
except openai.InternalServerError as e:
    assert e.status_code == 503 and e.code == "queue_full" and "--queue" in e.message, e
assert value("tandem_requests_running") == 2
for s in streams:
    s.close()
deadline = time.time() + 120
while value("tandem_requests_running") != 0:
    assert time.time() < deadline, "the generations went on after their clients left"
    time.sleep(0.2)
generated = value("tandem_completion_tokens_total")
time.sleep(2)
assert value("tandem_completion_tokens_total") == generated
assert value("tandem_queue_depth") == 0
assert value('tandem_requests_total{status="503"}') == full + 1
print("serve client test: all passed")
