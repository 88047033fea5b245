-- TPC-H Q6 in SQLite's dialect, with the discount's bounds written out. DataFusion compares
-- the DECIMAL(15,2) column with 0.06 - 0.01 and 0.06 + 0.01 as decimals (0.05 and 0.07, as
-- TPC-H means them); SQLite computes them in doubles, where 0.06 + 0.01 is
-- 0.06999999999999999 and the rows with a discount of 0.07 would be left out.
select
    sum(l_extendedprice * l_discount) as revenue
from
    lineitem
where
    l_shipdate >= '1994-01-01'
    and l_shipdate < date('1994-01-01', '+1 year')
    and l_discount between 0.05 and 0.07
    and l_quantity < 24;
