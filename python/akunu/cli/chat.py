"""akunu-chat: interactive chat with a GGUF model.

Type a message and press Enter. Commands: /reset (forget the conversation),
/system TEXT (set the system prompt and reset), /quit. Ctrl-C stops the
current answer; Ctrl-D or /quit leaves. With stdin from a pipe, the piped
text is one user message and the answer is printed.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from typing import Dict, List, Optional

from .common import CliError, add_model_args, add_sampling_args, load_model, run, sampling_kwargs

HELP = "commands: /reset  /system TEXT  /quit  (Ctrl-C stops an answer, Ctrl-D quits)"


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="akunu-chat", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    add_model_args(ap)
    ap.add_argument("-s", "--system", default=None, help="system prompt")
    ap.add_argument("--chat-template", default=None,
                    help="chatml, llama3, gemma, or a jinja2 file replacing the model's template")
    ap.add_argument("--no-stats", action="store_true", help="do not print tok/s after each answer")
    add_sampling_args(ap, temperature=0.7)
    return ap


class Chat:
    def __init__(self, model, args):
        self.model = model
        self.args = args
        self.system = args.system
        self.messages: List[Dict[str, str]] = []
        self.reset()

    def reset(self) -> None:
        self.messages = [{"role": "system", "content": self.system}] if self.system else []

    def answer(self, text: str, out=sys.stdout) -> None:
        self.messages.append({"role": "user", "content": text})
        reply = []
        interrupted = False
        # Ctrl-C sets a flag that the loop reads after each piece. A
        # KeyboardInterrupt raised wherever Python code happened to run
        # could be lost (an exception in a finalizer is only printed): the
        # answer then ran on to its end.
        stop = threading.Event()
        main_thread = threading.current_thread() is threading.main_thread()
        previous = signal.signal(signal.SIGINT, lambda signum, frame: stop.set()) if main_thread else None
        try:
            stream = self.model.chat(self.messages, max_tokens=self.args.max_tokens, stream=True,
                                     **sampling_kwargs(self.args, self.model))
            try:
                for piece in stream:
                    reply.append(piece)
                    out.write(piece)
                    out.flush()
                    if stop.is_set():
                        break
            except KeyboardInterrupt:  # where the flag's handler could not be set
                stop.set()
            if stop.is_set():
                interrupted = True
                stream.close()
        finally:
            if main_thread:
                signal.signal(signal.SIGINT, previous if previous is not None else signal.default_int_handler)
        out.write("\n")
        self.messages.append({"role": "assistant", "content": "".join(reply)})
        if interrupted:
            sys.stderr.write("[stopped]\n")
        if not self.args.no_stats:
            s = stream.result.stats
            sys.stderr.write(f"[{s.generated_tokens} tokens, {s.decode_tok_s:.1f} tok/s; prompt "
                             f"{s.prompt_tokens} tokens, {s.cached_tokens} cached]\n")
        sys.stderr.flush()

    def command(self, line: str) -> bool:
        """Handles a /command; returns False to quit."""
        cmd, _, rest = line.partition(" ")
        if cmd in ("/quit", "/exit"):
            return False
        if cmd == "/reset":
            self.reset()
            print("[conversation reset]")
        elif cmd == "/system":
            self.system = rest.strip() or None
            self.reset()
            print("[system prompt set; conversation reset]" if self.system else "[system prompt cleared]")
        else:
            print(HELP)
        return True


def interactive(chat: Chat) -> None:
    try:
        import readline  # noqa: F401  (line editing and history)
    except ImportError:
        pass
    print(f"akunu-chat: {chat.model.name} on {chat.model.device} ({chat.model.chat_template.name} template). "
          + HELP)
    while True:
        try:
            line = input("> ")
        except EOFError:
            print()
            return
        except KeyboardInterrupt:  # Ctrl-C at the prompt clears the line
            print()
            continue
        line = line.strip()
        if not line:
            continue
        if line.startswith("/"):
            if not chat.command(line):
                return
            continue
        chat.answer(line)


def main(argv: Optional[List[str]] = None) -> int:
    args = build_parser().parse_args(argv)

    def body() -> int:
        if args.chat_template and args.chat_template not in ("chatml", "llama3", "gemma"):
            with open(args.chat_template, encoding="utf-8") as f:
                args.chat_template = f.read()
        piped = not sys.stdin.isatty()
        text = sys.stdin.read() if piped else None
        if piped and not text.strip():
            raise CliError("nothing on stdin: pipe a message, or run in a terminal for interactive chat")
        model = load_model(args, quiet=piped)
        chat = Chat(model, args)
        if piped:
            chat.answer(text.strip())
        else:
            interactive(chat)
        return 0

    return run("akunu-chat", body, argv)


if __name__ == "__main__":
    sys.exit(main())
