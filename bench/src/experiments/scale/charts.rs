//! The SVG charts of `bench scale` and `bench sweep`: throughput against cores and against the
//! readahead window, and the device's mean request size against the window.

use std::collections::BTreeSet;

use super::outcome::{ConfigSummary, ScaleOutcome};
use crate::experiments::plots::{LineChart, Point, Series, XAxis};
use crate::experiments::runner::ScanConfig;
use crate::experiments::{io_name, sqpoll_name, CacheMode, Spread};

/// The settings other than `except` that take more than one value among the configurations
/// that ran, for naming a series by what distinguishes it.
fn series_label(c: &ScanConfig, ran: &[&ConfigSummary], except: &str) -> String {
    let varies = |f: &dyn Fn(&ScanConfig) -> String| {
        ran.iter()
            .map(|s| f(&s.config))
            .collect::<BTreeSet<_>>()
            .len()
            > 1
    };
    let mut parts = vec![io_name(c.io).to_string()];
    if varies(&|c| sqpoll_name(c.sqpoll).into()) {
        parts.push(format!("sqpoll {}", sqpoll_name(c.sqpoll)));
    }
    if except != "readahead" && varies(&|c| c.readahead.to_string()) {
        parts.push(format!("ra {}", c.readahead));
    }
    if varies(&|c| c.coalesce_kib.to_string()) {
        parts.push(format!("coalesce {} KiB", c.coalesce_kib));
    }
    if except != "cores" && varies(&|c| c.cores.to_string()) {
        parts.push(format!("{} cores", c.cores));
    }
    parts.join(", ")
}

/// The three charts of a scale or sweep experiment, with their file names: throughput against
/// cores and against the readahead window, and the device's mean request size against the
/// window.
pub fn scale_charts(o: &ScaleOutcome) -> Vec<(&'static str, LineChart)> {
    let ran: Vec<&ConfigSummary> = o.configs.iter().filter(|s| s.wall_s.is_some()).collect();
    let cpus = o.machine.cpus;
    // Throughput at the median, slowest and fastest runs (the bytes are the same in each).
    let gbs = |s: &ConfigSummary, x: i32| {
        let (w, g) = (
            s.wall_s.unwrap_or(Spread {
                median: 1.0,
                min: 1.0,
                max: 1.0,
            }),
            s.gb_per_s.unwrap_or(0.0),
        );
        Point {
            x,
            median: g,
            min: g * w.median / w.max,
            max: g * w.median / w.min.max(1e-12),
        }
    };
    // Group configurations into series by a key, keeping first-seen order.
    let group = |key: &dyn Fn(&ScanConfig) -> String| {
        let mut groups: Vec<(String, Vec<&ConfigSummary>)> = Vec::new();
        for s in &ran {
            let k = key(&s.config);
            match groups.iter_mut().find(|(g, _)| *g == k) {
                Some((_, v)) => v.push(s),
                None => groups.push((k, vec![s])),
            }
        }
        groups
    };
    let oversub: Vec<i32> = ran
        .iter()
        .filter(|s| s.oversubscribed)
        .map(|s| s.config.cores as i32)
        .collect();
    let mode = o.cache.name();
    // The readahead charts name the executor count when it is the same for every line.
    let cores: BTreeSet<usize> = ran.iter().map(|s| s.config.cores).collect();
    let ra_context = match cores.iter().next() {
        Some(&n) if cores.len() == 1 => {
            format!("{mode}, {n} executor{}", if n == 1 { "" } else { "s" })
        }
        _ => mode.to_string(),
    };
    let cores_series = group(&|c| series_label(c, &ran, "cores"))
        .into_iter()
        .map(|(label, mut v)| {
            v.sort_by_key(|s| s.config.cores);
            Series {
                label,
                points: v.iter().map(|s| gbs(s, s.config.cores as i32)).collect(),
            }
        })
        .collect();
    let windows: Vec<u32> = ran
        .iter()
        .map(|s| s.config.readahead)
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let at = |ra: u32| windows.iter().position(|&w| w == ra).unwrap_or(0) as i32;
    let ra_groups = group(&|c| series_label(c, &ran, "readahead"));
    let ra_series = ra_groups
        .iter()
        .map(|(label, v)| Series {
            label: label.clone(),
            points: v.iter().map(|s| gbs(s, at(s.config.readahead))).collect(),
        })
        .collect();
    let request_series = ra_groups
        .iter()
        .map(|(label, v)| Series {
            label: label.clone(),
            points: v
                .iter()
                .filter_map(|s| {
                    let kib: Vec<f64> = o
                        .runs
                        .iter()
                        .filter(|r| r.config_index == s.index)
                        .filter_map(|r| {
                            r.report
                                .device
                                .as_ref()
                                .filter(|d| d.requests > 0)
                                .map(|d| d.mean_request_kib)
                        })
                        .collect();
                    Spread::of(&kib).map(|k| Point {
                        x: at(s.config.readahead),
                        median: k.median,
                        min: k.min,
                        max: k.max,
                    })
                })
                .collect(),
        })
        .collect();
    let window_labels = XAxis::Categories(windows.iter().map(u32::to_string).collect());
    let whiskers = "line through medians; whiskers span min to max";
    vec![
        (
            "throughput-vs-cores.svg",
            LineChart {
                title: format!("Q6 throughput vs executors ({mode}, {cpus} CPUs)"),
                x_desc: "executors (cores)".into(),
                y_desc: "GB/s".into(),
                x_axis: XAxis::Numeric {
                    marked: oversub.clone(),
                },
                series: cores_series,
                note: Some(if oversub.is_empty() {
                    whiskers.to_string()
                } else {
                    format!("{whiskers}; * more executors than CPUs (time-sharing, not scaling)")
                }),
            },
        ),
        (
            "throughput-vs-readahead.svg",
            LineChart {
                title: format!("Q6 throughput vs readahead window ({ra_context})"),
                x_desc: "readahead window (pages in flight per executor)".into(),
                y_desc: "GB/s".into(),
                x_axis: window_labels.clone(),
                series: ra_series,
                note: Some(whiskers.into()),
            },
        ),
        (
            "request-size-vs-readahead.svg",
            LineChart {
                title: format!("Mean device request size vs readahead window ({ra_context})"),
                x_desc: "readahead window (pages in flight per executor)".into(),
                y_desc: "mean request at the device (KiB)".into(),
                x_axis: window_labels,
                series: request_series,
                note: Some(format!(
                    "{whiskers}; from /sys/block/<disk>/stat, device-wide{}",
                    if o.cache == CacheMode::Warm {
                        "; warm runs barely reach the device"
                    } else {
                        ""
                    }
                )),
            },
        ),
    ]
}
