-- One row per comment, with the sentiment of its text.
select
    id,
    thread_id,
    text,
    AI_CLASSIFY(text, ['positive', 'negative']):labels[0]::string as sentiment
from {{ source('reddit', 'comments') }}
