"""embed-count: per item, the embedding positions are exactly the rows the encoder produces.

The HF model scatters an item's encoder rows into the positions holding its modality token
(`config.image_token_id` / `audio_token_index`). So, per item, the subject must mark as many
positions as the HF processor's expansion holds of that token, and exactly the positions of its
own prompt that hold it.
"""

from __future__ import annotations

from conformance.checks.contract import PASS, Check, Outcome, Proof
from conformance.inputs.cases import Case
from conformance.subjects.context import Context


def run(ctx: Context, case: Case) -> Outcome:
    token = ctx.oracles["hf"].embed_token_id(case.modality)
    expected = ctx.oracle_output("hf", case).placeholders.get(case.modality, ())
    processed = ctx.subject_output(case)
    actual = processed.placeholders.get(case.modality, ())
    if len(expected) != len(actual):
        return Outcome(False, f"{len(actual)} {case.modality} items located, the processor "
                              f"expanded {len(expected)}")
    for index, (want, got) in enumerate(zip(expected, actual, strict=True)):
        if len(want.embed_positions) != len(got.embed_positions):
            return Outcome(False, f"{case.modality} item {index}: {len(got.embed_positions)} "
                                  f"embedding positions but the encoder produces "
                                  f"{len(want.embed_positions)} rows")
        token_positions = tuple(p for p in range(got.offset, got.offset + got.length)
                                if processed.prompt_ids[p] == token)
        if got.embed_positions != token_positions:
            return Outcome(False, f"{case.modality} item {index}: embedding positions "
                                  f"{list(got.embed_positions[:6])} are not where the "
                                  f"{case.modality} token {token} sits "
                                  f"{list(token_positions[:6])}")
    return PASS


CHECK = Check(
    id="embed-count",
    statement="Per item, the embedding positions are the positions the encoder's rows fill.",
    hint="embedding positions are not where the model's image/audio token sits: the "
         "replacement's most frequent token is not the token the encoder rows fill",
    level="case", run=run,
    proof=Proof("wrong-embed-token", "idefics3", "embedding positions"),
)
