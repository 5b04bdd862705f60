"""SIGTERM while a reply streams: the server stops taking connections at once, and the reply in
flight still comes whole.

Usage: sigterm.py BASE_URL PID
"""

import os
import signal
import socket
import sys
import time
import urllib.parse

import openai

base, pid = sys.argv[1], int(sys.argv[2])
client = openai.OpenAI(base_url=base + "/v1", api_key="none", max_retries=0, timeout=600)
model = client.models.list().data[0].id
stream = client.completions.create(
    model=model, prompt="Once upon a time", max_tokens=24, temperature=0, stream=True,
    stream_options={"include_usage": True},
)
chunks = iter(stream)
text = next(chunks).choices[0].text
os.kill(pid, signal.SIGTERM)
url = urllib.parse.urlparse(base)
deadline = time.time() + 30
while True:
    try:
        socket.create_connection((url.hostname, url.port), timeout=5).close()
    except (ConnectionRefusedError, ConnectionResetError):
        # Refused, or reset where a connection queued as the listener closed: not accepting.
        break
    assert time.time() < deadline, "still accepting connections 30 s after SIGTERM"
    time.sleep(0.05)
finish, usage = None, None
for c in chunks:
    usage = c.usage or usage
    for ch in c.choices:
        text += ch.text
        finish = ch.finish_reason or finish
assert finish in ("stop", "length") and usage is not None, (finish, usage)
print(f"sigterm test: the reply in flight finished ({usage.completion_tokens} tokens, {finish}): {text!r}")
