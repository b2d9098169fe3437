"""What an analysis could not do with what it was given, as types: the computing modules of
analysis/ raise these (all ValueErrors) and say the problem in plain words with no command-line
flag; generation/ adds what to type at the CLI, and a notebook catches the type it cares about."""


class AnalysisError(ValueError):
    """The base: `reason` names the problem for code, str() says it for people."""

    reason = "invalid input"


class NoQueryWord(AnalysisError):
    """The text has no query word to read attention from. `missing`: "pronoun" (the text has
    none), "word" (the word asked for is not in it), "empty" (the text is empty), "empty
    word" (the word asked for is) or "occurrence" (the word occurs fewer times than asked)."""

    reason = "no query word"

    def __init__(self, missing: str, message: str):
        super().__init__(message)
        self.missing = missing


class NothingToMeasure(AnalysisError):
    """None of the examples can be measured by `analysis` (its name: "causal", "lens",
    "patching", "answer"): each needs something none of them has."""

    reason = "nothing to measure"

    def __init__(self, analysis: str, message: str):
        super().__init__(message)
        self.analysis = analysis


class ReversedPairs(AnalysisError):
    """Pairs whose corrupt prompts favour the answer at least as much as the clean ones: the
    metric's gap (mean LD clean - mean LD corrupt) is not above 0, so a recovered fraction,
    which divides by it, means nothing. Most likely clean and corrupt are swapped."""

    reason = "reversed pairs"

    def __init__(self, clean_ld: float, corrupt_ld: float):
        super().__init__(
            f"the corrupt prompts favour the answer at least as much as the clean ones (mean "
            f"logit difference {clean_ld:.3f} clean, {corrupt_ld:.3f} corrupt), so no fraction "
            "of it can be recovered: the pairs look reversed; swap clean and corrupt"
        )
        self.clean_ld, self.corrupt_ld = clean_ld, corrupt_ld
