-- hotpotqa_type seed: zero-shot single-label AI_CLASSIFY of the question over the two HotpotQA types.
SELECT
  id,
  AI_CLASSIFY(question, ['bridge', 'comparison']):labels[0]::string AS label
FROM input
