-- dialog_topics seed: zero-shot single-label AI_CLASSIFY of a conversation's first line over the five topics.
SELECT
  id,
  AI_CLASSIFY(text, ['ai', 'coding', 'emotion', 'psychology', 'trivia']):labels[0]::string AS label
FROM input
