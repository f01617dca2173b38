{#-
    Ours, for history: every version of every key, built by the cdc_history
    materialization from the change rows bench_cdc_merge reads. Every carried column
    (name, email, amount, updated_at) is tracked.

    A version is valid from the time its change's lsn stands for: the batch's hour
    (lsn div 10^12) plus the lsn's offset in milliseconds, from 2024-10-07 (the
    benchmark's START). That is the change's updated_at, except for a late stale
    update, which the generator stamps with the hour of the batch that carries it; its
    lsn places it before the newer change it precedes, and so does this time.
    bench/bench_cdc_history.py computes the same time for the versions it expects.
-#}
{{ config(
    materialized='cdc_history',
    alias='bench_cdc_history_' ~ var('bench_scale') ~ 'x',
    unique_key=['id'],
    sequence_by=['lsn'],
    window_prune_column='_ingested_at',
    valid_from='timestamp_millis(1728259200000 + (lsn div 1000000000000) * 3600000'
        ~ ' + lsn % 1000000000000 % 3600000)',
    exclude_columns=['op', 'lsn', '_ingested_at', '_bronze_version'],
) }}

select * from {{ ref('bench_changes') }}
