#!/usr/bin/python3
"""vlmc-serve end to end (issue 20), with the shapes model (assets/shapes-vl) on the cpu backend:
/health and /v1/models; a text and two image chat completions (336x336, and 448x448 timed), each equal to vlmc-run's answer
for the same prompt; a conversation of earlier turns equal to vlmc-run -i's last answer; streaming gives the same text and ends with [DONE]; 8 concurrent clients
all answered correctly; malformed JSON, a body over --max-body, bad base64, bad image bytes, an
unknown path and a wrong API key each get a 4xx with an OpenAI error body, and the server keeps
serving; 200 small requests without the server's memory growing; curl as a real client;
SIGTERM exits 0. Standard library only (Debian's python3).
  usage: serve.py VLMC VLMC_SERVE VLMC_RUN"""
import base64
import http.client
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

VLMC, SERVE, RUN = sys.argv[1:4]
IMAGE = "tests/fixtures/shapes_scenes/scene_336x336_00.png"
IMAGE_448 = "tests/fixtures/images/square_448.png"  # the latency figure: a 448x448 image
IMAGE_Q = "What shapes and colors are in this image? Answer briefly."
COUNT_Q = "How many shapes are in this image? Answer briefly."
TEXT_Q = "What shapes are there?"
failed = 0
served = 0
ENV = dict(os.environ)  # TMPDIR: where the servers keep the requests' images


def ok(what):
    print(f"ok   {what}", flush=True)


def fail(what):
    global failed
    failed += 1
    print(f"FAIL {what}", flush=True)


def check(cond, what):
    (ok if cond else fail)(what)
    return cond


class Server:
    def __init__(self, artifact, *args):
        self.proc = subprocess.Popen([SERVE, artifact, "--port", "0", *args],
                                     stderr=subprocess.PIPE, text=True, env=ENV)
        self.port = None
        deadline = time.time() + 60
        while time.time() < deadline:
            line = self.proc.stderr.readline()
            if not line:
                break
            m = re.search(r"listening on http://127\.0\.0\.1:(\d+) \(model (\S+)\)", line)
            if m:
                self.port, self.model = int(m.group(1)), m.group(2)
                break
        if not self.port:
            raise SystemExit(f"FAIL vlmc-serve did not start: {line!r}")
        # keep draining stderr so the server never blocks on it
        self.log = []
        self.drain = threading.Thread(target=lambda: self.log.extend(self.proc.stderr),
                                      daemon=True)
        self.drain.start()

    def sanitizer_reports(self):
        """After exit: what ASan/UBSan/LSan said on stderr (in a sanitizer build)."""
        self.drain.join(timeout=10)
        return [l for l in self.log if re.search(r"Sanitizer|runtime error:", l)]

    def request(self, method, path, body=None, headers=None, raw=None):
        global served
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        h = {"Content-Type": "application/json"}
        h.update(headers or {})
        c.request(method, path, body=data, headers=h)
        r = c.getresponse()
        text = r.read().decode()
        c.close()
        served += 1
        return r.status, text, r.getheader("Content-Type")

    def chat(self, body, headers=None):
        status, text, _ = self.request("POST", "/v1/chat/completions", body, headers)
        return status, (json.loads(text) if text.startswith("{") else text)

    def rss_kb(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=30)


def vlmc_run(artifact, prompt, image=None):
    cmd = [RUN, artifact, "-p", prompt, "-n", "16", "--quiet"] + (["--image", image] if image else [])
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.rstrip("\n")


def vlmc_chat(artifact, turns, image=None):
    """vlmc-run -i's answers to `turns`, one per turn (the first turn shows the image)."""
    out = subprocess.run([RUN, artifact, "-i", "-n", "16", "--quiet"] +
                         (["--image", image] if image else []),
                         input="".join(t + "\n" for t in turns), check=True,
                         capture_output=True, text=True).stdout
    return out.rstrip("\n").split("\n")


def user(text, image_url=None):
    if image_url is None:
        return {"messages": [{"role": "user", "content": text}], "max_tokens": 16}
    return {"messages": [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": image_url}}, {"type": "text", "text": text}]}],
        "max_tokens": 16}


def answer_text(doc):
    return doc["choices"][0]["message"]["content"]


def timed_chat(server, body):
    """server.chat(body) and how long it took, in ms."""
    t0 = time.time()
    status, doc = server.chat(body)
    return status, doc, (time.time() - t0) * 1000


def is_error(status, doc, code, kind="invalid_request_error"):
    return (status == code and isinstance(doc, dict) and isinstance(doc.get("error"), dict)
            and doc["error"].get("type") == kind and isinstance(doc["error"].get("message"), str))


def stream(server, body):
    """The streamed text, the finish_reason and whether the events ended with [DONE]."""
    global served
    served += 1
    c = http.client.HTTPConnection("127.0.0.1", server.port, timeout=120)
    c.request("POST", "/v1/chat/completions", body=json.dumps(dict(body, stream=True)),
              headers={"Content-Type": "application/json"})
    r = c.getresponse()
    events = [e for e in r.read().decode().split("\n\n") if e]
    c.close()
    text, finish = "", None
    for e in events[:-1]:
        chunk = json.loads(e[len("data: "):])
        choice = chunk["choices"][0]
        text += choice["delta"].get("content", "")
        finish = choice["finish_reason"] or finish
    return r.status, r.getheader("Content-Type"), text, finish, events[-1] == "data: [DONE]"


def main():
    global served
    work = tempfile.mkdtemp()
    try:
        artifact = os.path.join(work, "shapes.vlmc")
        tmp = os.path.join(work, "tmp")
        os.mkdir(tmp)
        ENV["TMPDIR"] = tmp
        subprocess.run([VLMC, "compile", "assets/shapes-vl", "-o", artifact], check=True,
                       capture_output=True)
        want_text = vlmc_run(artifact, TEXT_Q)
        want_image = vlmc_run(artifact, IMAGE_Q, IMAGE)
        want_448 = vlmc_run(artifact, IMAGE_Q, IMAGE_448)
        want_chat = vlmc_chat(artifact, [IMAGE_Q, COUNT_Q], IMAGE)
        late_chat = vlmc_chat(artifact, [TEXT_Q, "/image " + IMAGE, IMAGE_Q])
        with open(IMAGE, "rb") as f:
            png = f.read()
        data_uri = "data:image/png;base64," + base64.b64encode(png).decode()
        with open(IMAGE_448, "rb") as f:
            uri_448 = "data:image/png;base64," + base64.b64encode(f.read()).decode()

        s = Server(artifact, "--max-body", str(1 << 20))
        status, text, ctype = s.request("GET", "/health")
        check(status == 200 and json.loads(text) == {"status": "ok"}, "/health")
        status, text, _ = s.request("GET", "/v1/models")
        models = json.loads(text)
        check(status == 200 and models["object"] == "list" and models["data"][0]["id"] == "shapes"
              and models["data"][0]["owned_by"] == "vlmc", f"/v1/models: {text}")

        status, doc = s.chat(user(TEXT_Q))
        check(status == 200 and answer_text(doc) == want_text
              and doc["object"] == "chat.completion" and doc["model"] == "shapes"
              and doc["choices"][0]["finish_reason"] in ("stop", "length")
              and doc["usage"]["total_tokens"] == doc["usage"]["prompt_tokens"]
              + doc["usage"]["completion_tokens"],
              f"text request equals vlmc-run's answer: {want_text!r}")

        status, doc, image_ms = timed_chat(s, user(IMAGE_Q, data_uri))
        check(status == 200 and answer_text(doc) == want_image,
              f"image request equals vlmc-run --image's answer: {want_image!r} "
              f"({image_ms:.0f} ms)")

        status, doc, ms_448 = timed_chat(s, user(IMAGE_Q, uri_448))
        check(status == 200 and answer_text(doc) == want_448,
              f"a 448x448 image request equals vlmc-run's answer: {want_448!r} ({ms_448:.0f} ms, "
              f"{doc['usage']['completion_tokens'] if status == 200 else '-'} tokens)")

        status, ctype, text, finish, done = stream(s, user(IMAGE_Q, data_uri))
        check(status == 200 and ctype.startswith("text/event-stream") and text == want_image
              and finish in ("stop", "length") and done,
              f"streaming: the same text, finish_reason {finish}, then [DONE]")

        # "stop": the answer ends before the first stop string, streamed or not
        cut = want_text.find(" ", 1)
        stop_word = want_text[cut + 1:cut + 4] if cut > 0 else want_text[1:3]
        want_cut = want_text[:want_text.find(stop_word)]
        status, doc = s.chat(dict(user(TEXT_Q), stop=[stop_word, "never-said"]))
        check(status == 200 and answer_text(doc) == want_cut
              and doc["choices"][0]["finish_reason"] == "stop",
              f"stop {stop_word!r}: {want_cut!r}")
        status, ctype, text, finish, done = stream(s, dict(user(TEXT_Q), stop=stop_word))
        check(status == 200 and text == want_cut and finish == "stop" and done,
              f"stop {stop_word!r}, streamed: {text!r}")
        across = want_text[cut - 1:cut + 2]  # spans two streamed pieces ("An", " orange")
        status, ctype, text, finish, done = stream(s, dict(user(TEXT_Q), stop=[across]))
        check(status == 200 and text == want_text[:want_text.find(across)] and finish == "stop",
              f"stop {across!r} across pieces, streamed: {text!r}")
        status, doc = s.chat(dict(user(TEXT_Q), stop="never-said"))
        check(status == 200 and answer_text(doc) == want_text, "a stop string never said")
        status, doc = s.chat(dict(user(TEXT_Q), stop=["a", "b", "c", "d", "e"]))
        check(is_error(status, doc, 400), "five stop strings: 400")

        results = [None] * 8

        def client(i):
            try:
                body = user(IMAGE_Q, data_uri) if i % 2 else user(TEXT_Q)
                results[i] = s.chat(body)
            except Exception as e:  # noqa: BLE001
                results[i] = (0, repr(e))
        threads = [threading.Thread(target=client, args=(i,)) for i in range(8)]
        t0 = time.time()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        good = sum(1 for i, (st, d) in enumerate(results)
                   if st == 200 and answer_text(d) == (want_image if i % 2 else want_text))
        check(good == 8, f"8 concurrent clients: {good} answered correctly "
              f"({time.time() - t0:.1f} s, one at a time)")

        # refusals: each a 4xx with an OpenAI error body, and the server keeps serving
        status, text, _ = s.request("POST", "/v1/chat/completions", raw=b'{"messages": [')
        check(is_error(status, json.loads(text), 400), "malformed JSON: 400")
        big = json.dumps(user("x" * (2 << 20))).encode()
        try:
            status, text, _ = s.request("POST", "/v1/chat/completions", raw=big)
            check(is_error(status, json.loads(text), 413), f"a 2 MiB body over --max-body 1 MiB: {status}")
        except OSError as e:
            fail(f"a 2 MiB body over --max-body: {e!r}")
        status, doc = s.chat(user(IMAGE_Q, "data:image/png;base64,iVBOR!!w0KGgo="))
        check(is_error(status, doc, 400) and "base64" in doc["error"]["message"], "bad base64: 400")
        bad_bytes = "data:image/png;base64," + base64.b64encode(b"not an image at all").decode()
        status, doc = s.chat(user(IMAGE_Q, bad_bytes))
        check(is_error(status, doc, 400), f"bad image bytes: 400 ({doc['error']['message']})")
        truncated = "data:image/png;base64," + base64.b64encode(png[:200]).decode()
        status, doc = s.chat(user(IMAGE_Q, truncated))
        check(is_error(status, doc, 400), "a truncated PNG: 400")
        status, doc = s.chat(user(IMAGE_Q, "https://example.com/a.png"))
        check(is_error(status, doc, 400) and "data URI" in doc["error"]["message"],
              "an https image URL: 400")
        status, doc = s.chat(user(IMAGE_Q, "file://" + os.path.abspath(IMAGE)))
        check(is_error(status, doc, 400), "a file image without --allow-file-images: 400")
        conversation = user(IMAGE_Q, data_uri)
        conversation["messages"] += [{"role": "assistant", "content": want_chat[0]},
                                     {"role": "user", "content": COUNT_Q}]
        status, doc = s.chat(conversation)
        check(len(want_chat) == 2 and status == 200 and answer_text(doc) == want_chat[1],
              f"a conversation (user with an image, assistant, user) answers as vlmc-run -i's "
              f"second turn: {want_chat!r}")
        late = {"messages": [{"role": "user", "content": TEXT_Q},
                             {"role": "assistant", "content": late_chat[0]},
                             user(IMAGE_Q, data_uri)["messages"][0]], "max_tokens": 16}
        status, doc = s.chat(late)
        check(len(late_chat) == 2 and status == 200 and answer_text(doc) == late_chat[1],
              f"vlmc-run -i with /image after the first turn answers as the same conversation "
              f"sent to the server: {late_chat!r}")
        status, doc = s.chat(dict(conversation, messages=[
            {"role": "system", "content": "You are terse."}] + conversation["messages"]))
        check(status == 200, "a conversation after a system message")
        status, doc = s.chat({"messages": [{"role": "user", "content": "hi"},
                                           {"role": "assistant", "content": "hello"}]})
        check(is_error(status, doc, 400) and "last message" in doc["error"]["message"],
              "a conversation ending with the assistant's message: 400")
        status, doc = s.chat({"messages": [{"role": "assistant", "content": "hello"},
                                           {"role": "user", "content": "hi"}]})
        check(is_error(status, doc, 400), "an assistant message before any user's: 400")
        status, doc = s.chat({"messages": [{"role": "user", "content": "hi"},
                                           {"role": "assistant", "content": [
                                               {"type": "image_url",
                                                "image_url": {"url": data_uri}}]},
                                           {"role": "user", "content": "again"}]})
        check(is_error(status, doc, 400), "an image in an assistant message: 400")
        status, text, _ = s.request("GET", "/v1/nothing")
        check(is_error(status, json.loads(text), 404), "an unknown path: 404")
        status, text, _ = s.request("GET", "/v1/chat/completions")
        check(is_error(status, json.loads(text), 405), "GET /v1/chat/completions: 405")
        for what, raw in [("a garbage request line", b"GARBAGE\r\n\r\n"),
                          ("a body cut short", b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
                           b"Content-Length: 100\r\n\r\n{\"messages\""),
                          ("a stream dropped at once", b"POST /v1/chat/completions HTTP/1.1\r\n"
                           b"Host: x\r\nContent-Length: %d\r\n\r\n%s" % (
                               len(json.dumps(dict(user(TEXT_Q), stream=True))),
                               json.dumps(dict(user(TEXT_Q), stream=True)).encode()))]:
            with socket.create_connection(("127.0.0.1", s.port), timeout=10) as sock:
                sock.sendall(raw)
                sock.shutdown(socket.SHUT_WR)
                try:
                    sock.recv(100)
                except OSError:
                    pass
            served += 1
            status, _, _ = s.request("GET", "/health")
            check(status == 200 and s.proc.poll() is None, f"{what}: the server keeps serving")
        status, text, _ = s.request("GET", "/health")
        check(status == 200, "/health still answers after the refusals")

        k = Server(artifact, "--api-key", "sesame", "--allow-file-images")
        status, doc = k.chat(user(TEXT_Q), {"Authorization": "Bearer wrong"})
        check(is_error(status, doc, 401), "a wrong API key: 401")
        status, doc = k.chat(user(TEXT_Q))
        check(is_error(status, doc, 401), "no API key: 401")
        status, doc = k.chat(user(TEXT_Q), {"Authorization": "Bearer sesame"})
        check(status == 200 and answer_text(doc) == want_text, "the right API key: answered")
        auth = {"Authorization": "Bearer sesame"}
        status, doc = k.chat(user(IMAGE_Q, "file://" + os.path.abspath(IMAGE)), auth)
        check(status == 200 and answer_text(doc) == want_image,
              "--allow-file-images: a file:// image is answered as vlmc-run --image")
        status, doc = k.chat(user(IMAGE_Q, os.path.join(work, "missing.png")), auth)
        check(is_error(status, doc, 400), "--allow-file-images: a missing file is a 400")
        status, _, _ = k.request("GET", "/health")
        check(status == 200, "/health needs no API key")
        check(k.stop() == 0, "SIGTERM: the second server exits 0")
        reports = k.sanitizer_reports()
        check(not reports, f"the second server's stderr has no sanitizer report: {reports[:3]}")

        curl = shutil.which("curl")
        if curl:
            out = subprocess.run([curl, "-sS", f"http://127.0.0.1:{s.port}/v1/chat/completions",
                                  "-H", "Content-Type: application/json",
                                  "-d", json.dumps(user(TEXT_Q))],
                                 capture_output=True, text=True, timeout=60)
            served += 1
            check(out.returncode == 0 and answer_text(json.loads(out.stdout)) == want_text,
                  "curl as a client")
        else:
            fail("curl is not installed (scripts/install-deps.sh installs it)")

        before = s.rss_kb()
        t0 = time.time()
        soak_ok = 0
        for i in range(200):
            body = dict(user(TEXT_Q if i % 4 else IMAGE_Q, None if i % 4 else data_uri),
                        max_tokens=4)
            status, doc = s.chat(body)
            soak_ok += status == 200
        after = s.rss_kb()
        check(soak_ok == 200 and after - before < 50 * 1024,
              f"soak: {soak_ok}/200 answered in {time.time() - t0:.1f} s, VmRSS {before} kB "
              f"before, {after} kB after")

        left = [f for d in os.listdir(tmp) for f in os.listdir(os.path.join(tmp, d))]
        check(not left, f"no request's image file is left in the server's temp dir: {left}")

        # SIGTERM while a request is in flight (a stream whose first event has come): it is
        # finished, then the server exits 0
        c = http.client.HTTPConnection("127.0.0.1", s.port, timeout=120)
        c.request("POST", "/v1/chat/completions",
                  body=json.dumps(dict(user(IMAGE_Q, data_uri), stream=True)),
                  headers={"Content-Type": "application/json"})
        r = c.getresponse()
        served += 1
        first = r.readline().decode()
        s.proc.send_signal(signal.SIGTERM)
        events = [e for e in (first + r.read().decode()).split("\n\n") if e]
        c.close()
        text = "".join(json.loads(e[6:])["choices"][0]["delta"].get("content", "")
                       for e in events[:-1])
        rc = s.proc.wait(timeout=30)
        check(rc == 0, "SIGTERM: exit 0")
        reports = s.sanitizer_reports()
        check(not reports, f"the server's stderr has no sanitizer report: {reports[:3]}")
        check(text == want_image and events[-1] == "data: [DONE]",
              "the request in flight at SIGTERM was answered to the end")
        check(not os.listdir(tmp), "the servers removed their temp dirs")
        print(f"served {served} requests; image request {image_ms:.0f} ms (336x336), "
              f"{ms_448:.0f} ms (448x448)")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"{'FAIL' if failed else 'ok'}: {failed} failures")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
