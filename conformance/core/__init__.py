"""The ground floor: what every layer above names the same way, importing nothing of ours above
it (tests/test_layers.py). The vLLM releases and labels a cell can carry (`vllms`), and the
wording of a difference with its values masked (`signatures`), the subjects' and oracles'
names (`subjects`).
"""
