#!/usr/bin/env python3
"""vlmc-run -i as a user drives it (issue 20): Ctrl-C (SIGINT) while an answer is being written
stops that answer, keeps the process and the conversation, and the next message is answered;
Ctrl-C at the prompt ends the chat with exit 0. The chat commands: /image PATH before the
first message adds the image (its pads are in the context); after it, the next message shows
it, the whole conversation run again with both images where they were shown; /clear starts a new conversation; an unknown command is named; a line ending in a
backslash continues on the next; /exit ends the chat (later lines are not read).

    chat_controls.py VLMC_RUN ARTIFACT IMAGE"""
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

failures = 0


def check(what, cond, detail=""):
    global failures
    print(("ok   " if cond else "FAIL ") + what + (f": {detail}" if detail and not cond else ""))
    failures += 0 if cond else 1


def wait_turns(path, n, proc, timeout):
    """Waits until --ids-out has recorded n turns (a turn's line is written when it ends)."""
    end = time.time() + timeout
    while time.time() < end and proc.poll() is None:
        if os.path.exists(path) and sum(1 for _ in open(path)) >= n:
            return True
        time.sleep(0.05)
    return False


def interrupt_answer(proc, ids, message, turn):
    """Sends a message, presses Ctrl-C once its answer has begun, waits for the turn's end."""
    proc.stdin.write(message)
    began = proc.stdout.read(1) != b""  # the answer has begun
    time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    ended = wait_turns(ids, turn, proc, 60)
    check(f"turn {turn}: Ctrl-C during the answer stops it, the process goes on",
          began and ended and proc.poll() is None)


IMAGE_PAD = 151655


def commands(run, artifact, image, tmp):
    ids = os.path.join(tmp, "cmd.jsonl")
    script = (f"/image {image}\n/image {tmp}/missing.png\n/bogus\n"
              "What shapes are in this image?\n"
              f"/image {image}\n"
              "And the \\\nfirst one?\n"
              "/clear\nHello\n/exit\nnot read\n")
    proc = subprocess.run([run, artifact, "-i", "--quiet", "-n", "12", "--ids-out", ids],
                          input=script.encode(), capture_output=True, timeout=600)
    err = proc.stderr.decode(errors="replace")
    check("the chat ends with exit 0", proc.returncode == 0, f"exit {proc.returncode}: {err}")
    turns = [json.loads(line) for line in open(ids)] if os.path.exists(ids) else []
    check("three messages answered (/exit stops reading)", len(turns) == 3, str(len(turns)))
    if len(turns) == 3:
        pads = [t["context"].count(IMAGE_PAD) for t in turns]
        check("/image before the first message: its pads are in the context", pads[0] > 0,
              str(pads))
        check("/image after the first message: the next turn's context holds both images "
              "(the conversation run again)",
              pads[1] == 2 * pads[0] and len(turns[1]["context"]) > len(turns[0]["context"]),
              str(pads))
        check("/clear: a new conversation without the image",
              pads[2] == 0 and len(turns[2]["context"]) < len(turns[0]["context"]), str(pads))
    check("a missing /image file is named", "missing.png: No such file" in err, err)
    check("an unknown command is named", "unknown command '/bogus'" in err, err)
    check("/image after the first message is taken for the next one",
          "(image 2: " in err and "shown with the next message" in err, err)


def main():
    run, artifact, image = sys.argv[1], sys.argv[2], sys.argv[3]
    with tempfile.TemporaryDirectory() as tmp:
        commands(run, artifact, image, tmp)
        ids = os.path.join(tmp, "ids.jsonl")
        # A long answer: --ignore-eos, so that only -n 2000 or Ctrl-C ends it (an answer that
        # ended by itself before the Ctrl-C would leave the signal to the prompt, ending the chat).
        proc = subprocess.Popen([run, artifact, "-i", "--quiet", "-n", "2000", "--ignore-eos",
                                 "-t", "4",
                                 "--seed", "7", "--ids-out", ids],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, bufsize=0)
        interrupt_answer(proc, ids, b"Tell me about the shapes.\n", 1)
        interrupt_answer(proc, ids, b"Again, with \\\nmore words.\n", 2)  # and a continued line
        # Ctrl-C at the prompt (the process waits in its read of stdin) ends the chat
        time.sleep(0.3)
        proc.send_signal(signal.SIGINT)
        try:
            rc = proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            rc = "hung"
        err = proc.stderr.read().decode(errors="replace")
        check("Ctrl-C at the prompt ends the chat with exit 0", rc == 0, f"exit {rc}: {err}")
        turns = [json.loads(line) for line in open(ids)]
        check("two turns were recorded", len(turns) == 2, str(len(turns)))
        for t in turns:
            n = len(t["generated"])
            check(f"turn {t['turn']}: the answer was cut by Ctrl-C ({n} of at most 2000 tokens)",
                  0 < n < 2000)
    print(f"{failures} failed" if failures else "all passed")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
