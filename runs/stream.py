"""A run's samples as text, streamed piece by piece as tokens are sampled: the tokenizer decodes
(TextStream), stop strings end a sample (StopStrings), and model.sampling draws the tokens. It
needs both the model and its tokenizer, so it sits on the runs floor, above model/ and data/."""

from model.sampling import generate


class TextStream:
    """Decode tokens as they come. A token may end in the middle of a UTF-8 character (byte
    BPE), which decodes to U+FFFD until the rest arrives, so such a tail is held back."""

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer
        self.pending = []

    def push(self, token_id):
        """Text that is now complete (maybe "")."""
        self.pending.append(token_id)
        text = self.tokenizer.decode(self.pending)
        if text.endswith("\ufffd"):
            return ""
        self.pending = []
        return text

    def flush(self):
        """Whatever is held back, as it decodes (with U+FFFD for bytes that never completed)."""
        text = self.tokenizer.decode(self.pending) if self.pending else ""
        self.pending = []
        return text


class StopStrings:
    """Streamed text cut just before the first stop string. Text that could be the start of a
    stop string is held back until the next piece shows whether it is, so no part of a stop
    string, nor anything after one, is ever printed, even when it spans several tokens."""

    def __init__(self, stops):
        self.stops = list(stops)
        self.held = ""
        self.stopped = False  # True once a stop string is complete

    def push(self, text):
        """The text now safe to print; once a stop string is complete, the text before it."""
        text = self.held + text
        starts = [text.index(stop) for stop in self.stops if stop in text]
        if starts:
            self.held, self.stopped = "", True
            return text[: min(starts)]
        keep = max(
            (k for stop in self.stops for k in range(1, len(stop)) if text.endswith(stop[:k])),
            default=0,
        )
        self.held = text[len(text) - keep :]
        return text[: len(text) - keep]

    def flush(self):
        """What is held back, at the end of the sample."""
        text, self.held = self.held, ""
        return text


def continuation(run, idx, max_new_tokens: int, stops=(), **sampling):
    """One sample's text after the prompt ids `idx` (1, T), piece by piece as it is sampled;
    `sampling` is model.sampling.generate's keywords (temperature, top_k, top_p, generator,
    use_cache). It ends before the first of `stops` or at the tokenizer's end-of-text token."""
    text, stop = TextStream(run.tokenizer), StopStrings(stops)
    eot = getattr(run.tokenizer, "eot_id", None)
    for next_ids in generate(run.model, idx, max_new_tokens, **sampling):
        token = next_ids.item()
        if token == eot:
            break
        yield stop.push(text.push(token))
        if stop.stopped:
            return
    yield stop.push(text.flush())
    yield stop.flush()
