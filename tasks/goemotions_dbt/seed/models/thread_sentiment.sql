-- Per thread: how many comments, and how many of each sentiment.
with comments as (
    select * from {{ ref('stg_comments') }}
    where length(text) > 20  -- short comments are noise
),

threads as (
    select * from {{ source('reddit', 'threads') }}
)

select
    threads.thread_id,
    threads.forum,
    count(comments.id) as n_comments,
    count_if(comments.sentiment = 'positive') as n_positive,
    count_if(comments.sentiment = 'negative') as n_negative,
    count_if(comments.sentiment = 'ambiguous') as n_ambiguous,
    count_if(comments.sentiment = 'neutral') as n_neutral
from threads
left join comments on comments.thread_id = threads.thread_id
group by threads.thread_id, threads.forum
