"""Choice twins for labelled examples, from the lexicon: the same sentence, every candidate kept,
with what decides changed so that another candidate (B) is the answer instead of the antecedent
(A). The twin (data/pronouns/twin_field.py) goes on after its pronoun with one of B's doings.

    agreement  the pronoun flipped to B's, where B's number or gender gives it one that A does not
               take ("the doorman ... the seals ... They" -> "He"); a B whose pronoun no third
               candidate takes is tried first (the metric compares A and B only);
    meaning    the describing words between the last candidate and the pronoun (adjectives and
               descriptions of the lexicon that fit A's kind) replaced by ones that fit B's kind
               and no other candidate's ("Busy and greedy, it" -> "Bright and fragrant, it");
    role       A and B exchange places, where both are nouns of one kind and take the pronoun
               (so each fits the other's slot: the generator fills slots, verbs and actions by
               kind): "Beside the grandfather, the man ... he" -> "Beside the man, the
               grandfather ... he".

Each example gets its possible twins in a fixed order (one seeded draw per example), so that the
analysis can take the first one its tokenizer keeps token-aligned; or none, and the reason (one of
REASONS). Every candidate must be a noun of the lexicon (a user's own names are not known): what
pronoun it takes, its kind and its doings come from there. The continuations compared are each
candidate's own: A's is the text's where its first word is one of A's doings' (a generated
example), else A's first doing whose first word B's doings do not share; B's is its first doing
whose first word A's doings do not share."""

import random
import re
from dataclasses import replace

from data.pronouns.draw import tables
from data.pronouns.jsonl import Example
from data.pronouns.lexicon import find_noun, lexicon
from data.pronouns.twin_field import Twin

REASONS = {
    "no kind": "the example does not say what decides it (decided_by)",
    "unknown noun": "a candidate is not a noun of the lexicon",
    "no other pronoun": "no other candidate takes a pronoun of its own",
    "no same-kind candidate": "no other candidate of the antecedent's kind takes the pronoun",
    "no describing words": "no describing words of the lexicon stand before the pronoun",
    "other words": "words that are not the lexicon's describing words stand before the pronoun",
    "no fitting words": "no describing words fit another candidate alone",
    "no distinct doing": "the candidates' doings start with the same words",
}
GLUE = {"and", "but", "still", "as", "ever", "so", "then", "yet", "again"}
ALTERNATIVES = 40  # twins offered per example at most (the analysis keeps the first aligned)


def _first_words(noun):
    return {d.split()[0] for d in noun.doings}


def _doing(noun, plural, avoid):
    """noun's first doing whose first word is not in `avoid`, "was" as "were" after a plural."""
    for d in noun.doings:
        if d.split()[0] not in avoid and d.split()[0] != "was":
            return d
    for d in noun.doings:
        if d.split()[0] not in avoid:
            return "were" + d[3:] if plural else d
    return None


def _cased(word, like):
    return word[0].upper() + word[1:] if like[:1].isupper() else word


def _continued(example, a, b):
    """(the example, its continuation made A's own where needed; B's doing), or None."""
    (a_noun, a_plural), (b_noun, _) = a, b
    rest = example.text[example.pronoun[1] :]
    words = rest.split()
    if words and words[0] in _first_words(a_noun) and words[0] not in _first_words(b_noun):
        return example, _doing(b_noun, b[1], _first_words(a_noun))
    own = _doing(a_noun, a_plural, _first_words(b_noun))
    if own is None:
        return None
    text = example.text[: example.pronoun[1]] + " " + own + "."
    return replace(example, text=text), _doing(b_noun, b[1], _first_words(a_noun))


def _twin(example, a, b, prefix, pronoun, antecedent):
    """The example with a Twin whose text is `prefix` (up to and including its pronoun at
    `pronoun`) and B's doing, B at `antecedent`; None where no doing tells A and B apart."""
    made = _continued(example, a, b)
    if made is None or made[1] is None:
        return None
    clean, doing = made
    return replace(clean, twin=Twin(prefix + " " + doing + ".", pronoun, antecedent))


def _agreement(example, nouns):
    s, e = example.pronoun
    said = example.text[s:e]
    taken = [noun.pronoun(plural) for noun, plural in nouns]
    # B's pronoun rules A out and B in; a third candidate that takes it too is allowed (the
    # metric compares A and B only), but a B whose pronoun no other takes is tried first.
    order = sorted(range(1, len(nouns)), key=lambda i: taken.count(taken[i]) > 1)
    out, why = [], "no other pronoun"
    for i in order:
        other = taken[i]
        if other is None or other == said.lower():
            continue
        word = _cased(other, said)
        prefix = example.text[:s] + word
        twin = _twin(example, nouns[0], nouns[i], prefix, (s, s + len(word)), _spans(example)[i])
        out, why = (out + [twin], why) if twin else (out, "no distinct doing")
    return out, why


def _spans(example):
    return [example.antecedent, *example.distractors]


def _with_article(before, form):
    """`before` (the text up to a noun) with an "a"/"an" at its end made to fit `form`."""
    m = re.search(r"\b([Aa]n?) $", before)
    if not m:
        return before
    article = "an" if form[0] in "aeiou" else "a"
    article = article.capitalize() if m.group(1)[0].isupper() else article
    return before[: m.start(1)] + article + " "


def _role(example, nouns):
    said = example.text[slice(*example.pronoun)].lower()
    spans, out, why = _spans(example), [], "no same-kind candidate"
    a_noun, a_plural = nouns[0]
    prefix = example.text[: example.pronoun[1]]
    for i, (noun, plural) in enumerate(nouns[1:], start=1):
        if noun.kind != a_noun.kind or plural != a_plural or noun.pronoun(plural) != said:
            continue
        (s1, e1), (s2, e2) = sorted([spans[0], spans[i]])
        first, second = (nouns[i], nouns[0]) if s1 == spans[0][0] else (nouns[0], nouns[i])
        forms = [
            _cased(n.plural if p else n.word, prefix[s:e])
            for (n, p), (s, e) in ((first, (s1, e1)), (second, (s2, e2)))
        ]
        head = _with_article(prefix[:s1], forms[0]) + forms[0]
        middle = _with_article(prefix[e1:s2], forms[1])
        text = head + middle + forms[1] + prefix[e2:]
        at = (len(head) - len(forms[0]), len(head)) if first is nouns[i] else None
        at = at or (len(head + middle), len(head + middle) + len(forms[1]))
        pronoun_at = (len(text) - len(said), len(text))
        twin = _twin(example, nouns[0], nouns[i], text, pronoun_at, at)
        out, why = (out + [twin], why) if twin else (out, "no distinct doing")
    return out, why


def _words_before(example, kind):
    """(start, end, field, kinds) of the lexicon's descriptions ("desc") and adjectives ("adj")
    that fit `kind`, between the last candidate and the pronoun, in text order, not overlapping
    (descriptions, the longer, found first)."""
    region_start = max(end for _, end in _spans(example))
    region = example.text[region_start : example.pronoun[0]].lower()
    found, lex = [], lexicon()
    for field, table in (("desc", lex.descriptions), ("adj", lex.adjectives)):
        for phrase, kinds in table:
            if kind not in kinds:
                continue
            for m in re.finditer(r"\b" + re.escape(phrase) + r"\b", region):
                s, e = m.start() + region_start, m.end() + region_start
                if not any(s < fe and fs < e for fs, fe, _, _ in found):
                    found.append((s, e, field, kinds))
    return sorted(found), region_start


def _only_describing(example, phrases, region_start):
    """Whether the words between the last candidate and the pronoun are the found phrases and
    GLUE alone: then the phrases are all that decides."""
    text = list(example.text[region_start : example.pronoun[0]].lower())
    for s, e, _, _ in phrases:
        text[s - region_start : e - region_start] = " " * (e - s)
    return set(re.findall(r"[a-z']+", "".join(text))) <= GLUE


def _meaning(example, nouns, rng):
    tables_ = tables()
    phrases, region_start = _words_before(example, nouns[0][0].kind)
    if not phrases:
        return [], "no describing words"
    if not _only_describing(example, phrases, region_start):
        return [], "other words"
    out, kinds, why = [], [noun.kind for noun, _ in nouns], "no fitting words"
    for i in range(1, len(nouns)):
        others = set(kinds[:i] + kinds[i + 1 :])
        if kinds[i] in others or nouns[i][0].pronoun(nouns[i][1]) != nouns[0][0].pronoun(
            nouns[0][1]
        ):
            continue
        pools = [
            [p for p, fit in tables_.describing[field][kinds[i]] if not fit & others]
            for _, _, field, _ in phrases
        ]
        if not all(pools):
            continue
        for _ in range(ALTERNATIVES):
            text, shift = example.text[: example.pronoun[1]], 0
            used = set()
            for (s, e, _, _), pool in zip(phrases, pools):
                word = rng.choice([p for p in pool if p not in used] or pool)
                used.add(word)
                put = _cased(word, text[s + shift : e + shift])
                text = text[: s + shift] + put + text[e + shift :]
                shift += len(put) - (e - s)
            start = example.pronoun[0] + shift
            twin = _twin(example, nouns[0], nouns[i], text, (start, len(text)), _spans(example)[i])
            if twin is None:
                why = "no distinct doing"
            elif twin not in out:
                out.append(twin)
    return out, why


def choice_twins(example: Example) -> tuple[list[Example], str | None]:
    """(the example with each of its possible twins, in the order to try them; None) or ([],
    the key in REASONS of why it has none). An example that gives its own twin (a user's file)
    is itself the one to try."""
    if example.twin is not None:
        return [example], None
    if example.decided_by is None:
        return [], "no kind"
    nouns = [find_noun(example.text[s:e]) for s, e in _spans(example)]
    if None in nouns:
        return [], "unknown noun"
    if example.decided_by == "agreement":
        out, why = _agreement(example, nouns)
    elif example.decided_by == "role":
        out, why = _role(example, nouns)
    else:
        out, why = _meaning(example, nouns, random.Random(example.text))
    return (out[:ALTERNATIVES], None) if out else ([], why)
