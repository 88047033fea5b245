-- TPC-H Q4 in SQLite's dialect. The correlated EXISTS is written as the equivalent
-- uncorrelated IN, which SQLite evaluates once (the EXISTS form rescans lineitem per order).
select
    o_orderpriority,
    count(*) as order_count
from
    orders
where
    o_orderdate >= '1993-07-01'
    and o_orderdate < date('1993-07-01', '+3 month')
    and o_orderkey in (
        select
            l_orderkey
        from
            lineitem
        where
            l_commitdate < l_receiptdate
    )
group by
    o_orderpriority
order by
    o_orderpriority;
