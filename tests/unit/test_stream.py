"""runs/stream.py: a sample's text as it streams, whole characters only, cut before a stop
string."""

from data.tokenizer import train_tokenizer
from runs.stream import StopStrings, TextStream


def test_bpe_text_streams_without_broken_characters():
    tokenizer = train_tokenizer("bpe", "plain ascii text", 256)  # 256: bytes only, no merges
    text = "héllo wörld ✓"
    stream = TextStream(tokenizer)
    pieces = [stream.push(i) for i in tokenizer.encode(text)]
    assert "".join(pieces) + stream.flush() == text
    assert all("\ufffd" not in piece for piece in pieces)
    assert pieces[1] == "" and pieces[2] == "é"  # é is two bytes: held back, then whole
    stream.push(tokenizer.encode("✓")[0])  # a character cut short stays visible at the end
    assert stream.flush() == "\ufffd"


def test_stop_strings_hold_back_only_what_could_start_one():
    stops = StopStrings(["owl", "at"])
    assert [stops.push(t) for t in ("The o", "x", " a", "a")] == ["The ", "ox", " ", "a"]
    assert stops.flush() == "a" and not stops.stopped
    stops = StopStrings(["l ho", "wl"])
    assert stops.push("The o") == "The o" and stops.push("wl hoo") == "" and stops.stopped
