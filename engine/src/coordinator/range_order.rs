//! [`RangeOrder`]: how a scan's leaves are cut into ranges and read.

/// How the leaves are cut into ranges and in which order an executor reads and decodes its
/// range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RangeOrder {
    /// Ranges cut from the leaves by page number, each read in file order: the most
    /// coalesced I/O, for kernels that do not care in which order rows come.
    File,
    /// Ranges cut from the leaves in b-tree order
    /// ([`partitioner::TablePlan::split_in_key_order`]), each read and decoded in that order,
    /// so that range 0's rows, then range 1's, ... are the table in rowid order, whatever the
    /// order of the leaves in the file. An executor that fails cancels only the executors
    /// after it: the output before a failure still comes out.
    Key,
}
