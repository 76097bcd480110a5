with source as (
    
    {#-
    Normally we would select from the table here, but we are using seeds to load
    our data in this project
    #}
    select * from {{ source('jaffle_shop', 'raw_payments') }}

),

renamed as (

    select
        id as payment_id,
        order_id,
        case when payment_method = 'gift_card' then 'coupon' else payment_method end as payment_method,

        amount

    from source

)

select * from renamed
