-- goemotions seed: one multi-label AI_CLASSIFY call over the 28 GoEmotions labels.
SELECT
  id,
  AI_CLASSIFY(
    text,
    ['admiration', 'amusement', 'anger', 'annoyance', 'approval', 'caring', 'confusion', 'curiosity', 'desire', 'disappointment', 'disapproval', 'disgust', 'embarrassment', 'excitement', 'fear', 'gratitude', 'grief', 'joy', 'love', 'nervousness', 'optimism', 'pride', 'realization', 'relief', 'remorse', 'sadness', 'surprise', 'neutral'],
    {'output_mode': 'multi'}
  ):labels AS labels
FROM input
