"""embed-count: per item, the embedding positions are exactly the rows the encoder produces.

The HF model scatters an item's encoder rows into the positions holding its modality token
(`config.image_token_id` / `audio_token_index`). So, per item, the subject must mark as many
positions as the HF processor's expansion holds of that token, and exactly the positions of its
own prompt that hold it. Where the subject also reports a per-item token count the model splits
the encoder's output by (`num_audio_tokens`), that count is the number of those positions: a
wrong one hands an item its neighbour's rows. `num_image_patches` counts rows of pixel data (1
per llava image, tiles, patches before merging), not embeddings, so it has no such equality.
"""

from __future__ import annotations

from conformance.checks.contract import Check, Outcome, Proof
from conformance.core.subjects import HF, VLLM_BACKEND
from conformance.inputs.cases import Case
from conformance.subjects.context import Context
from impl.types import Placeholder

POSITIONS = "embedding positions"
COUNT = "token count"
TOKEN_COUNTS = {"audio": "num_audio_tokens"}  # the split sizes of the encoder's output


def claims(ctx: Context) -> tuple[str, ...]:
    return (POSITIONS, *((COUNT,) if set(TOKEN_COUNTS) & set(ctx.recipe.modalities) else ()))


def run(ctx: Context, case: Case) -> Outcome:
    modality, differences, exercised = case.modality, [], {POSITIONS}
    token = ctx.oracles[HF].embed_token_id(modality)
    expected = ctx.oracle_output(HF, case).placeholders.get(modality, ())
    processed = ctx.subject_output(case)
    actual = processed.placeholders.get(modality, ())
    if len(expected) != len(actual):
        return Outcome(False, f"{len(actual)} {modality} items located, the processor "
                              f"expanded {len(expected)}", exercised=frozenset(exercised))
    for index, (want, got) in enumerate(zip(expected, actual, strict=True)):
        if found := item_differences(f"{modality} item {index}", modality, token, want, got,
                                     processed.prompt_ids):
            differences += found
            break
    if name := TOKEN_COUNTS.get(modality):
        exercised.add(COUNT)
        fields = processed.item_fields.get(modality, [])
        for index, got in enumerate(actual):
            count = fields[index].get(name) if index < len(fields) else None
            if count is None or int(count) != len(got.embed_positions):
                differences.append(f"{modality} item {index}: {name} {count} but its "
                                   f"placeholder holds {len(got.embed_positions)} embedding "
                                   f"positions")
                break
    return Outcome.judged(differences, exercised)


def item_differences(where: str, modality: str, token: int, want: Placeholder, got: Placeholder,
                     ids: tuple[int, ...]) -> list[str]:
    """One item's embedding positions against the positions of its range holding `token`,
    each way apart (a known surplus of marked structure tokens hides no unmarked token), then
    their number against the rows the HF processor's expansion makes the encoder produce."""
    marked = set(got.embed_positions)
    holding = {p for p in range(got.offset, got.offset + got.length) if ids[p] == token}
    found = []
    if extra := sorted(marked - holding):
        found.append(f"{where}: {len(extra)} embedding position(s) hold other ids than the "
                     f"{modality} token {token}: {sorted({ids[p] for p in extra})[:6]}")
    if missing := sorted(holding - marked):
        found.append(f"{where}: {len(missing)} position(s) holding the {modality} token {token} "
                     f"are not embedding positions, first at {missing[0]}")
    if not found and len(want.embed_positions) != len(got.embed_positions):
        found.append(f"{where}: {len(got.embed_positions)} embedding positions but the encoder "
                     f"produces {len(want.embed_positions)} rows")
    return found


CHECK = Check(
    id="embed-count",
    statement="Per item, the embedding positions are the positions the encoder's rows fill, "
              "as many as the item's token count (where one splits the encoder's output).",
    hint="embedding positions are not where the model's image/audio token sits: the "
         "replacement's most frequent token is not the token the encoder rows fill; or a "
         "per-item count (num_audio_tokens) is not the item's embedding positions",
    level="case", run=run, claims=claims,
    compared_with="the HF model's embedding token and the processor's token count",
    proof=Proof("wrong-embed-token", "idefics3", "embedding position(s) hold other ids"),
    matrix_fault="backend-embed-dropped",
    more_proofs=(Proof("backend-embed-dropped", "llava",
                       "image item 0: 1 position(s) holding the image token 4 are not "
                       "embedding positions",
                       subject=VLLM_BACKEND),),
)
