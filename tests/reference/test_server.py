"""`celer serve` driven by the official `openai` client and by raw HTTP (issue 8).

A real server on SmolLM2-135M-Instruct (the default model) on a free port, 8 sequences in
parallel. Checked: the models list; chat and completions, streaming and not, the same text both
ways; a stop string; finish_reason "length" with exactly max_tokens tokens; usage: prompt tokens
equal to transformers' rendering of the chat template tokenized by Hugging Face `tokenizers`
(tests/reference/chat_template_ref.py, tokenizer_ref.py), and the same usage streamed
(include_usage) and not; 32 concurrent streaming clients × 3 requests each, greedy, every
response identical to the same request served alone. Then malformed and hostile requests: each
gets a 4xx with OpenAI's JSON error shape, and /health still answers 200 after each. A second
server (a tiny synthetic model with --api-key) checks authentication and the queue limit.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

openai = pytest.importorskip("openai")

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "reference"))
CELER = os.environ.get("CELER_BIN") or str(ROOT / "build" / "celer")
SMOLLM = Path.home() / ".cache" / "celer" / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"
QUESTION = [{"role": "user", "content": "What is the capital of France?"}]


class Server:
    def __init__(self, *args: str):
        self.p = subprocess.Popen([CELER, "serve", "--port", "0", *args], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)
        self.port = None
        deadline = time.time() + 120
        for line in self.p.stderr:
            m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
            if m:
                self.port = int(m.group(1))
            if "ready:" in line:
                break
            assert time.time() < deadline, "celer serve did not get ready"
        assert self.port, f"celer serve did not start: exit {self.p.poll()}"
        threading.Thread(target=self.p.stderr.read, daemon=True).start()  # drain

    def request(self, method: str, path: str, body: bytes | str | None = None, headers: dict | None = None):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        c.request(method, path, body=body, headers=headers or {})
        r = c.getresponse()
        data = r.read()
        c.close()
        return r.status, dict(r.getheaders()), data

    def client(self, key: str = "none"):
        return openai.OpenAI(base_url=f"http://127.0.0.1:{self.port}/v1", api_key=key, max_retries=0)

    def stop(self):
        self.p.terminate()
        assert self.p.wait(timeout=60) == 0


@pytest.fixture(scope="module")
def srv():
    if not SMOLLM.exists():
        pytest.fail(f"{SMOLLM} is missing: scripts/fetch-model smollm2-135m")
    s = Server("-m", str(SMOLLM), "--parallel", "8", "--model-id", "smollm2")
    yield s
    s.stop()


def chat(srv, messages=QUESTION, **kw):
    return srv.client().chat.completions.create(model="smollm2", messages=messages, temperature=0, **kw)


def stream_text(stream) -> tuple[str, str | None, object]:
    text, finish, usage = "", None, None
    for ch in stream:
        if ch.usage:
            usage = ch.usage
        for c in ch.choices:
            d = getattr(c, "delta", None)
            text += (d.content or "") if d is not None else (c.text or "")
            finish = c.finish_reason or finish
    return text, finish, usage


def test_models(srv):
    ids = [m.id for m in srv.client().models.list().data]
    assert ids == ["smollm2"]


def test_chat_answers_and_counts(srv):
    import chat_template_ref
    import tokenizer_ref
    from test_chat_template import _gguf_template

    r = chat(srv, max_tokens=40)
    c = r.choices[0]
    assert "Paris" in c.message.content and c.finish_reason == "stop" and c.message.role == "assistant"
    template, bos, eos = _gguf_template(str(SMOLLM))
    hf, _ = tokenizer_ref.load_reference(str(SMOLLM))
    prompt = chat_template_ref.render(template, QUESTION, add_generation_prompt=True, bos_token=bos, eos_token=eos)
    want = len(hf(prompt, add_special_tokens=False)["input_ids"])  # the template writes BOS itself
    assert r.usage.prompt_tokens == want
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens
    s = chat(srv, max_tokens=40, stream=True, stream_options={"include_usage": True})
    text, finish, usage = stream_text(s)
    assert text == c.message.content and finish == "stop"
    assert usage.model_dump() == r.usage.model_dump()


def test_completions(srv):
    cl = srv.client()
    r = cl.completions.create(model="smollm2", prompt="The capital of France is", temperature=0, max_tokens=8)
    assert r.choices[0].finish_reason == "length" and r.usage.completion_tokens == 8
    text, finish, _ = stream_text(cl.completions.create(model="smollm2", prompt="The capital of France is",
                                                        temperature=0, max_tokens=8, stream=True))
    assert text == r.choices[0].text and finish == "length"


def test_stop_and_length(srv):
    r = chat(srv, max_tokens=40, stop=["Paris"])
    assert "Paris" not in r.choices[0].message.content and r.choices[0].finish_reason == "stop"
    assert r.choices[0].message.content.strip()  # the text before it
    r = chat(srv, max_tokens=3)
    assert r.choices[0].finish_reason == "length" and r.usage.completion_tokens == 3


def test_logprobs_against_mlx_lm(srv):
    """Each token's log-probability: the greedy token is the most likely, the list is sorted, one
    entry per generated token, the same streamed; and the first answer token's margin over the
    runner-up equals mlx-lm's (tests/data/mlx/smollm2-135m.json, prompt chat0: this request's prompt)."""
    import tokenizer_ref

    r = chat(srv, max_tokens=12, logprobs=True, top_logprobs=5)
    lp = r.choices[0].logprobs.content
    assert len(lp) == r.usage.completion_tokens
    for e in lp:
        tops = [t.logprob for t in e.top_logprobs]
        assert len(tops) == 5 and tops == sorted(tops, reverse=True) and all(x <= 0 for x in tops)
        assert e.token == e.top_logprobs[0].token and e.logprob == tops[0]  # greedy
        assert bytes(e.bytes).decode("utf-8", "replace") == e.token
    assert "".join(e.token for e in lp).startswith(r.choices[0].message.content[:10])
    streamed = [e for ch in chat(srv, max_tokens=12, logprobs=True, top_logprobs=5, stream=True)
                for c in ch.choices if c.logprobs for e in c.logprobs.content]
    assert [(e.token, e.logprob) for e in streamed] == [(e.token, e.logprob) for e in lp]

    fx = json.loads((ROOT / "tests/data/mlx/smollm2-135m.json").read_text())
    p = next(p for p in fx["prompts"] if p["name"] == "chat0")
    assert p["text"].endswith("What is the capital of France?<|im_end|>\n<|im_start|>assistant\n")
    at = len(p["ids"]) - 1
    hf, _ = tokenizer_ref.load_reference(str(SMOLLM))
    assert lp[0].token == tokenizer_ref.decode(hf, [p["top1"][at]])
    margin = lp[0].top_logprobs[0].logprob - lp[0].top_logprobs[1].logprob
    assert abs(margin - p["margin"][at]) < 0.03, (margin, p["margin"][at])


def test_completions_logprobs(srv):
    r = srv.client().completions.create(model="smollm2", prompt="The capital of France is", temperature=0,
                                        max_tokens=6, logprobs=3)
    lp = r.choices[0].logprobs
    assert len(lp.tokens) == len(lp.token_logprobs) == len(lp.top_logprobs) == len(lp.text_offset) == 6
    assert "".join(lp.tokens) == r.choices[0].text
    assert lp.text_offset == [sum(len(t) for t in lp.tokens[:i]) for i in range(6)]
    for tok, x, top in zip(lp.tokens, lp.token_logprobs, lp.top_logprobs):
        assert len(top) <= 3 and max(top.values()) == x and top[tok] == x


PROMPTS = ["Name a color.", "Count to five.", "What is 2+2?", "Say hello in French.", "Name a fruit.",
           "What is the largest planet?", "Write a haiku about rain.", "Who wrote Hamlet?"]


def test_concurrent_identical_to_alone(srv):
    """32 streaming clients x 3 requests each, greedy: each response equals the request served alone."""
    reqs = [[{"role": "user", "content": PROMPTS[(i + k) % len(PROMPTS)] + f" ({i % 4})"}] for i in range(32)
            for k in range(3)]
    alone = {}
    for m in {json.dumps(m) for m in reqs}:
        alone[m] = chat(srv, json.loads(m), max_tokens=24).choices[0].message.content

    def client(i):
        out = []
        for k in range(3):
            m = reqs[3 * i + k]
            text, _, _ = stream_text(chat(srv, m, max_tokens=24, stream=True))
            out.append((json.dumps(m), text))
        return out

    with ThreadPoolExecutor(32) as ex:
        results = [x for r in ex.map(client, range(32)) for x in r]
    assert len(results) == 96
    for m, text in results:
        assert text == alone[m], f"{m}: concurrent {text!r} != alone {alone[m]!r}"


# ---- malformed and hostile requests -------------------------------------------------------------

def msgs(*ms):
    return {"messages": list(ms)}


U = {"role": "user", "content": "hi"}
BAD = [
    ("broken json", "/v1/chat/completions", b'{"messages": [', 400, None),
    ("not an object", "/v1/chat/completions", b"[1, 2]", 400, None),
    ("empty body", "/v1/chat/completions", b"", 400, None),
    ("a number", "/v1/chat/completions", b"42", 400, None),
    ("invalid utf-8", "/v1/chat/completions", b'{"messages": [{"role": "user", "content": "\xff\xfe"}]}', 400, None),
    ("missing messages", "/v1/chat/completions", {}, 400, "messages"),
    ("messages a string", "/v1/chat/completions", {"messages": "hi"}, 400, "messages"),
    ("empty messages", "/v1/chat/completions", {"messages": []}, 400, "messages"),
    ("message not object", "/v1/chat/completions", msgs("hi"), 400, "messages[0]"),
    ("no role", "/v1/chat/completions", msgs({"content": "hi"}), 400, "messages[0].role"),
    ("bad role", "/v1/chat/completions", msgs({"role": "wizard", "content": "hi"}), 400, "messages[0].role"),
    ("role a number", "/v1/chat/completions", msgs({"role": 3, "content": "hi"}), 400, "messages[0].role"),
    ("no content", "/v1/chat/completions", msgs({"role": "user"}), 400, "messages[0].content"),
    ("content a number", "/v1/chat/completions", msgs({"role": "user", "content": 5}), 400, "messages[0].content"),
    ("image part", "/v1/chat/completions", msgs({"role": "user", "content": [{"type": "image_url", "image_url": {}}]}),
     400, "messages[0].content"),
    ("part without text", "/v1/chat/completions", msgs({"role": "user", "content": [{"type": "text"}]}), 400,
     "messages[0].content"),
    ("negative max_tokens", "/v1/chat/completions", {**msgs(U), "max_tokens": -5}, 400, "max_tokens"),
    ("zero max_tokens", "/v1/chat/completions", {**msgs(U), "max_tokens": 0}, 400, "max_tokens"),
    ("huge max_tokens", "/v1/chat/completions", {**msgs(U), "max_tokens": 10**12}, 400, "max_tokens"),
    ("max_tokens past context", "/v1/chat/completions", {**msgs(U), "max_tokens": 100000}, 400, "max_tokens"),
    ("max_tokens a string", "/v1/chat/completions", {**msgs(U), "max_tokens": "10"}, 400, "max_tokens"),
    ("max_tokens fractional", "/v1/chat/completions", {**msgs(U), "max_tokens": 2.5}, 400, "max_tokens"),
    ("bad max_completion_tokens", "/v1/chat/completions", {**msgs(U), "max_completion_tokens": -1}, 400,
     "max_completion_tokens"),
    ("temperature a string", "/v1/chat/completions", {**msgs(U), "temperature": "hot"}, 400, "temperature"),
    ("temperature too high", "/v1/chat/completions", {**msgs(U), "temperature": 7}, 400, "temperature"),
    ("temperature negative", "/v1/chat/completions", {**msgs(U), "temperature": -1}, 400, "temperature"),
    ("top_p above 1", "/v1/chat/completions", {**msgs(U), "top_p": 1.5}, 400, "top_p"),
    ("top_p a list", "/v1/chat/completions", {**msgs(U), "top_p": [1]}, 400, "top_p"),
    ("top_k negative", "/v1/chat/completions", {**msgs(U), "top_k": -3}, 400, "top_k"),
    ("min_p above 1", "/v1/chat/completions", {**msgs(U), "min_p": 2}, 400, "min_p"),
    ("seed a string", "/v1/chat/completions", {**msgs(U), "seed": "x"}, 400, "seed"),
    ("presence_penalty too big", "/v1/chat/completions", {**msgs(U), "presence_penalty": 3}, 400,
     "presence_penalty"),
    ("frequency_penalty a bool", "/v1/chat/completions", {**msgs(U), "frequency_penalty": True}, 400,
     "frequency_penalty"),
    ("stop a number", "/v1/chat/completions", {**msgs(U), "stop": 3}, 400, "stop"),
    ("stop list of numbers", "/v1/chat/completions", {**msgs(U), "stop": [1, 2]}, 400, "stop"),
    ("too many stops", "/v1/chat/completions", {**msgs(U), "stop": ["a", "b", "c", "d", "e"]}, 400, "stop"),
    ("stream a string", "/v1/chat/completions", {**msgs(U), "stream": "yes"}, 400, "stream"),
    ("stream_options a list", "/v1/chat/completions", {**msgs(U), "stream_options": []}, 400, "stream_options"),
    ("include_usage a number", "/v1/chat/completions", {**msgs(U), "stream_options": {"include_usage": 1}}, 400,
     "include_usage"),
    ("n = 2", "/v1/chat/completions", {**msgs(U), "n": 2}, 400, "n"),
    ("n a string", "/v1/chat/completions", {**msgs(U), "n": "1"}, 400, "n"),
    ("logprobs a string", "/v1/chat/completions", {**msgs(U), "logprobs": "yes"}, 400, "logprobs"),
    ("top_logprobs without logprobs", "/v1/chat/completions", {**msgs(U), "top_logprobs": 3}, 400, "top_logprobs"),
    ("top_logprobs 21", "/v1/chat/completions", {**msgs(U), "logprobs": True, "top_logprobs": 21}, 400,
     "top_logprobs"),
    ("completions logprobs 6", "/v1/completions", {"prompt": "a", "logprobs": 6}, 400, "logprobs"),
    ("json_object", "/v1/chat/completions", {**msgs(U), "response_format": {"type": "json_object"}}, 400,
     "response_format"),
    ("response_format a string", "/v1/chat/completions", {**msgs(U), "response_format": "json"}, 400,
     "response_format"),
    ("tools an object", "/v1/chat/completions", {**msgs(U), "tools": {}}, 400, "tools"),
    ("tool without function", "/v1/chat/completions", {**msgs(U), "tools": [{"type": "function"}]}, 400, "tools"),
    ("forced tool_choice", "/v1/chat/completions",
     {**msgs(U), "tool_choice": {"type": "function", "function": {"name": "f"}}}, 400, "tool_choice"),
    ("unknown model", "/v1/chat/completions", {**msgs(U), "model": "gpt-17"}, 404, "model"),
    ("model a number", "/v1/chat/completions", {**msgs(U), "model": 4}, 400, "model"),
    ("prompt past the context", "/v1/chat/completions", msgs({"role": "user", "content": "word " * 5000}), 400,
     "messages"),
    ("completions without prompt", "/v1/completions", {}, 400, "prompt"),
    ("completions prompt list", "/v1/completions", {"prompt": ["a", "b"]}, 400, "prompt"),
    ("completions prompt a number", "/v1/completions", {"prompt": 7}, 400, "prompt"),
    ("completions past context", "/v1/completions", {"prompt": "word " * 5000}, 400, "prompt"),
    ("completions bad temperature", "/v1/completions", {"prompt": "a", "temperature": "x"}, 400, "temperature"),
    ("unknown route", "/v1/embeddings", {"input": "a"}, 404, None),
    ("no such path", "/admin", {}, 404, None),
]


def check_error(status, data, want_status, param):
    assert status == want_status, f"status {status}, want {want_status}: {data[:300]!r}"
    body = json.loads(data)
    err = body["error"]
    assert isinstance(err["message"], str) and err["message"]
    assert isinstance(err["type"], str)
    if param:
        assert err["param"] == param, f"param {err['param']!r}, want {param!r}: {err['message']}"


@pytest.mark.parametrize("name, path, body, status, param", BAD, ids=[b[0] for b in BAD])
def test_malformed(srv, name, path, body, status, param):
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    st, _, data = srv.request("POST", path, raw, {"Content-Type": "application/json"})
    check_error(st, data, status, param)
    assert srv.request("GET", "/health")[0] == 200


@pytest.mark.parametrize("method, path", [("GET", "/v1/chat/completions"), ("DELETE", "/v1/completions"),
                                          ("POST", "/v1/models"), ("PUT", "/v1/models")])
def test_wrong_method(srv, method, path):
    st, _, data = srv.request(method, path, b"{}")
    check_error(st, data, 405, None)
    assert srv.request("GET", "/health")[0] == 200


def test_body_over_the_limit(srv):
    st, _, data = srv.request("POST", "/v1/chat/completions", b'{"messages": "' + b"x" * (9 << 20) + b'"}',
                              {"Content-Type": "application/json"})
    check_error(st, data, 413, None)
    assert srv.request("GET", "/health")[0] == 200


def test_unknown_fields_ignored(srv):
    st, _, data = srv.request("POST", "/v1/chat/completions",
                              json.dumps({**msgs(U), "max_tokens": 2, "frobnicate": {"x": 1}, "user": "me"}).encode())
    assert st == 200, data
    assert json.loads(data)["usage"]["completion_tokens"] <= 2


def test_metrics(srv):
    st, h, data = srv.request("GET", "/metrics")
    text = data.decode()
    assert st == 200 and h["Content-Type"].startswith("text/plain")
    for name in ("celer_requests_total{status=\"200\"}", "celer_requests_total{status=\"400\"}",
                 "celer_prompt_tokens_total", "celer_generated_tokens_total", "celer_queue_depth",
                 "celer_running_sequences", "celer_kv_blocks_used", "celer_kv_blocks_free",
                 "celer_time_to_first_token_seconds_bucket", "celer_inter_token_latency_seconds_count"):
        assert name in text, name


# ---- authentication and the queue limit: a tiny synthetic model ----------------------------------

@pytest.fixture(scope="module")
def keyed(tmp_path_factory):
    d = tmp_path_factory.mktemp("serve")
    model = d / "tiny.gguf"
    r = subprocess.run([CELER, "synth", "--arch", "llama", "--layers", "4", "--embd", "256", "--ff", "512", "--heads",
                        "4", "--kv-heads", "2", "--vocab", "512", "--type", "Q8_0", "-o", str(model)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    s = Server("-m", str(model), "--api-key", "sekret", "--parallel", "1", "--max-queue", "0", "--timeout", "2")
    yield s
    s.stop()


@pytest.mark.parametrize("header", [None, "Bearer wrong", "sekret", "Basic sekret", "Bearer "])
def test_bad_auth(keyed, header):
    st, _, data = keyed.request("POST", "/v1/completions", json.dumps({"prompt": "a", "max_tokens": 2}).encode(),
                                {"Authorization": header} if header else {})
    check_error(st, data, 401, None)
    assert keyed.request("GET", "/health")[0] == 200


def test_slow_loris(keyed):
    """40 connections that send half a header and stop: the server keeps answering, and closes
    each within its --timeout (2 s) of silence."""
    import socket

    slow = []
    for _ in range(40):
        k = socket.create_connection(("127.0.0.1", keyed.port), timeout=10)
        k.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Len")
        slow.append(k)
    t0 = time.time()
    assert keyed.request("GET", "/health")[0] == 200
    body = json.dumps({"prompt": "a", "max_tokens": 2}).encode()
    assert keyed.request("POST", "/v1/completions", body, {"Authorization": "Bearer sekret"})[0] == 200
    assert time.time() - t0 < 2, "the slow connections held up the others"
    for k in slow:
        try:
            assert k.recv(1024) == b""  # closed by the server, unanswered
        except ConnectionResetError:
            pass
        assert time.time() - t0 < 8, "a silent connection outlived the 2 s timeout"
        k.close()
    assert keyed.request("GET", "/health")[0] == 200


def test_good_auth_and_full_queue(keyed):
    body = json.dumps({"prompt": "a", "max_tokens": 2}).encode()
    st, _, data = keyed.request("POST", "/v1/completions", body, {"Authorization": "Bearer sekret"})
    assert st == 200, data  # a free slot: no waiting needed
    # --parallel 1 --max-queue 0: while one request runs, another is a 503 with Retry-After
    # greedy, 3000 tokens: seconds of generation on this model, ample time for the check below
    slow = json.dumps({"prompt": "a", "max_tokens": 3000, "temperature": 0, "stream": True}).encode()
    c = http.client.HTTPConnection("127.0.0.1", keyed.port, timeout=60)
    c.request("POST", "/v1/completions", slow, {"Authorization": "Bearer sekret"})
    first = c.getresponse()
    first.readline()  # it is running
    st, h, data = keyed.request("POST", "/v1/completions", body, {"Authorization": "Bearer sekret"})
    assert st == 503 and h.get("Retry-After") == "1", (st, data)
    assert json.loads(data)["error"]["code"] == "queue_full"
    c.close()  # the client goes away: its request is cancelled and the slot frees
    for _ in range(50):
        st, _, _ = keyed.request("POST", "/v1/completions", body, {"Authorization": "Bearer sekret"})
        if st == 200:
            break
        time.sleep(0.1)
    assert st == 200
    with pytest.raises(openai.AuthenticationError):
        keyed.client("wrong").models.list()
    assert [m.id for m in keyed.client("sekret").models.list().data] == ["tiny"]


# ---- what a model's output turns into: tool calls and reasoning, end to end -----------------------

@pytest.fixture(scope="module")
def scripted(tmp_path_factory):
    import scripted_models

    d = tmp_path_factory.mktemp("scripted")
    servers = {name: Server("-m", str(scripted_models.write(name, d / f"{name}.gguf")), "--model-id", name)
               for name in scripted_models.SCRIPTS}
    yield servers
    for s in servers.values():
        s.stop()


WEATHER_TOOL = {"type": "function", "function": {"name": "get_weather", "description": "The weather in a city",
                                                 "parameters": {"type": "object",
                                                                "properties": {"city": {"type": "string"}}}}}


def test_tool_call_round_trip(scripted):
    """The model's <tool_call> becomes tool_calls (whole and streamed); the client's reply with the
    call and the tool's result is accepted and rendered into the next prompt."""
    cl = scripted["tool-call"].client()
    ask = [{"role": "user", "content": "What is the weather in Paris?"}]
    r = cl.chat.completions.create(model="tool-call", messages=ask, tools=[WEATHER_TOOL], temperature=0)
    c = r.choices[0]
    assert c.finish_reason == "tool_calls" and c.message.content is None
    (call,) = c.message.tool_calls
    assert call.type == "function" and call.function.name == "get_weather" and call.id
    assert json.loads(call.function.arguments) == {"city": "Paris"}
    # streamed: an index, id and name first, then argument pieces that add up to the same JSON
    calls: dict[int, dict] = {}
    finish = None
    for ch in cl.chat.completions.create(model="tool-call", messages=ask, tools=[WEATHER_TOOL], temperature=0,
                                         stream=True):
        for ci in ch.choices:
            finish = ci.finish_reason or finish
            for tc in ci.delta.tool_calls or []:
                d = calls.setdefault(tc.index, {"id": tc.id, "name": tc.function.name, "args": ""})
                d["args"] += tc.function.arguments or ""
    assert finish == "tool_calls" and list(calls) == [0]
    assert calls[0]["id"] == call.id and calls[0]["name"] == "get_weather"
    assert json.loads(calls[0]["args"]) == {"city": "Paris"}
    # the round trip: the call and its result go back; the prompt grows by both
    back = ask + [{"role": "assistant", "content": None, "tool_calls": [call.model_dump()]},
                  {"role": "tool", "tool_call_id": call.id, "content": '{"temperature": 21}'}]
    r2 = cl.chat.completions.create(model="tool-call", messages=back, tools=[WEATHER_TOOL], temperature=0)
    assert r2.usage.prompt_tokens > r.usage.prompt_tokens + len('{"temperature": 21}')
    # tool_choice none: the tools are not offered, so the template does not list them
    r3 = cl.chat.completions.create(model="tool-call", messages=ask, tools=[WEATHER_TOOL], tool_choice="none",
                                    temperature=0)
    assert r3.usage.prompt_tokens < r.usage.prompt_tokens


def test_reasoning_split(scripted):
    """<think>…</think> is reasoning, in reasoning_content and reasoning; the rest is content."""
    cl = scripted["reasoning"].client()
    r = cl.chat.completions.create(model="reasoning", messages=[{"role": "user", "content": "Hi"}], temperature=0)
    m = r.choices[0].message
    extra = m.model_extra or {}
    assert "The user wants a greeting." in extra["reasoning_content"] and extra["reasoning"] == extra["reasoning_content"]
    assert "<think>" not in m.content and "</think>" not in m.content and m.content.strip() == "Hello!"
    reasoning = content = ""
    for ch in cl.chat.completions.create(model="reasoning", messages=[{"role": "user", "content": "Hi"}],
                                         temperature=0, stream=True):
        for ci in ch.choices:
            x = ci.delta.model_extra or {}
            reasoning += x.get("reasoning_content") or ""
            content += ci.delta.content or ""
    assert reasoning == extra["reasoning_content"] and content == m.content
