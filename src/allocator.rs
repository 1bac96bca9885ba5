//! The binary's allocator: mimalloc, asked through its plain entry points
//! for an allocation aligned to a word or less (every mimalloc block is
//! aligned so), and through its aligned ones only for the rare larger
//! alignment. The `mimalloc` crate's allocator takes the aligned entry
//! points for every allocation; on a replayed request they cost several
//! hundred instructions more than the plain ones (BENCHMARKS.md).

use std::alloc::{GlobalAlloc, Layout};

use libmimalloc_sys as mi;

/// The alignment every mimalloc block has: a word (its sizes are whole words).
const PLAIN_ALIGN: usize = std::mem::size_of::<usize>();

/// mimalloc as the global allocator (`#[global_allocator]` in `main.rs`).
pub struct Mimalloc;

// SAFETY: every block comes from mimalloc with at least the layout's size and
// alignment (the plain entry points only for alignments every block has), and
// goes back to mimalloc, which frees and resizes blocks of either kind of entry.
unsafe impl GlobalAlloc for Mimalloc {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: mimalloc's allocation functions take any size and alignment.
        let block = unsafe {
            if layout.align() <= PLAIN_ALIGN {
                mi::mi_malloc(layout.size())
            } else {
                mi::mi_malloc_aligned(layout.size(), layout.align())
            }
        };
        block.cast()
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as in `alloc`.
        let block = unsafe {
            if layout.align() <= PLAIN_ALIGN {
                mi::mi_zalloc(layout.size())
            } else {
                mi::mi_zalloc_aligned(layout.size(), layout.align())
            }
        };
        block.cast()
    }

    #[inline]
    unsafe fn dealloc(&self, block: *mut u8, _layout: Layout) {
        // SAFETY: the caller hands back a block this allocator gave, so mimalloc's.
        unsafe { mi::mi_free(block.cast()) }
    }

    #[inline]
    unsafe fn realloc(&self, block: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: `block` is mimalloc's (as in `dealloc`); the new block keeps the alignment.
        let moved = unsafe {
            if layout.align() <= PLAIN_ALIGN {
                mi::mi_realloc(block.cast(), new_size)
            } else {
                mi::mi_realloc_aligned(block.cast(), new_size, layout.align())
            }
        };
        moved.cast()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// Blocks of every size and alignment are aligned as asked, hold
        /// what is written to them, keep it when resized, and start zeroed
        /// when asked to.
        #[test]
        fn blocks_are_aligned_and_keep_their_bytes(
            size in proptest::prop_oneof![1usize..160, 1usize..70_000],
            new_size in proptest::prop_oneof![1usize..160, 1usize..70_000],
            align_log in 0u32..13,
            seed: u8,
        ) {
            let layout = Layout::from_size_align(size, 1 << align_log).unwrap();
            let aligned = |block: *mut u8| !block.is_null() && block.addr().is_multiple_of(layout.align());
            // SAFETY: the layouts have non-zero sizes; each block is used within its size and
            // freed once, with the layout it was made with.
            unsafe {
                let zeroed = Mimalloc.alloc_zeroed(layout);
                proptest::prop_assert!(aligned(zeroed));
                proptest::prop_assert!(std::slice::from_raw_parts(zeroed, size).iter().all(|&b| b == 0));
                Mimalloc.dealloc(zeroed, layout);

                let block = Mimalloc.alloc(layout);
                proptest::prop_assert!(aligned(block));
                let bytes = |at: usize| seed.wrapping_add(at as u8);
                for at in 0..size {
                    block.add(at).write(bytes(at));
                }
                let moved = Mimalloc.realloc(block, layout, new_size);
                proptest::prop_assert!(aligned(moved));
                let kept = std::slice::from_raw_parts(moved, size.min(new_size));
                proptest::prop_assert!(kept.iter().enumerate().all(|(at, &b)| b == bytes(at)));
                Mimalloc.dealloc(moved, Layout::from_size_align(new_size, layout.align()).unwrap());
            }
        }
    }
}
