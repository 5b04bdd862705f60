// A Vulkan layer that reports what the driver made of each compute pipeline: the statistics of
// VK_KHR_pipeline_executable_properties (register count, shared memory, spills where the driver
// gives them) and, where the driver offers them, its internal representations (disassembly).
// It turns the extension on when the application creates its device, asks for the statistics on
// every vkCreateComputePipelines, and prints them when the application names the pipeline
// (wgpu names each pipeline after its kernel when WGPU_DEBUG=1). README.md says how to run it.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vulkan/vk_layer.h>
#include <vulkan/vulkan.h>

#define EXPORT __attribute__((visibility("default")))

static PFN_vkGetInstanceProcAddr next_gipa;
static PFN_vkGetDeviceProcAddr next_gdpa;
static PFN_vkCreateComputePipelines next_create_compute;
static PFN_vkSetDebugUtilsObjectNameEXT next_set_name;
static PFN_vkGetPipelineExecutablePropertiesKHR next_exec_props;
static PFN_vkGetPipelineExecutableStatisticsKHR next_exec_stats;
static PFN_vkGetPipelineExecutableInternalRepresentationsKHR next_exec_ir;
static VkDevice the_device;

// Statistics of pipelines not yet named: a small table, oldest overwritten.
#define SLOTS 4096
static struct {
    uint64_t pipeline;
    char *text;
} pending[SLOTS];
static unsigned pending_next;

static FILE *out(void) {
    static FILE *f;
    if (!f) {
        const char *path = getenv("TANDEM_VK_STATS");
        f = (path && *path) ? fopen(path, "a") : NULL;
        if (!f) f = stderr;
    }
    return f;
}

static void append(char **buf, size_t *len, size_t *cap, const char *s) {
    size_t n = strlen(s);
    if (*len + n + 1 > *cap) {
        *cap = (*len + n + 1) * 2;
        *buf = realloc(*buf, *cap);
    }
    memcpy(*buf + *len, s, n + 1);
    *len += n;
}

static char *describe(VkPipeline pipeline) {
    char *buf = NULL, line[1536];
    size_t len = 0, cap = 0;
    append(&buf, &len, &cap, "");
    VkPipelineInfoKHR info = {VK_STRUCTURE_TYPE_PIPELINE_INFO_KHR, NULL, pipeline};
    uint32_t n = 0;
    if (next_exec_props(the_device, &info, &n, NULL) != VK_SUCCESS) return buf;
    VkPipelineExecutablePropertiesKHR *props = calloc(n, sizeof *props);
    for (uint32_t i = 0; i < n; i++) props[i].sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_PROPERTIES_KHR;
    next_exec_props(the_device, &info, &n, props);
    for (uint32_t e = 0; e < n; e++) {
        snprintf(line, sizeof line, "  executable %u (%s): subgroup size %u\n", e, props[e].name,
                 props[e].subgroupSize);
        append(&buf, &len, &cap, line);
        VkPipelineExecutableInfoKHR ex = {VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_INFO_KHR, NULL, pipeline, e};
        uint32_t ns = 0;
        next_exec_stats(the_device, &ex, &ns, NULL);
        VkPipelineExecutableStatisticKHR *st = calloc(ns, sizeof *st);
        for (uint32_t i = 0; i < ns; i++) st[i].sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_STATISTIC_KHR;
        next_exec_stats(the_device, &ex, &ns, st);
        for (uint32_t i = 0; i < ns; i++) {
            char v[64];
            switch (st[i].format) {
            case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_BOOL32_KHR: snprintf(v, sizeof v, "%u", st[i].value.b32); break;
            case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_INT64_KHR: snprintf(v, sizeof v, "%lld", (long long)st[i].value.i64); break;
            case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_UINT64_KHR: snprintf(v, sizeof v, "%llu", (unsigned long long)st[i].value.u64); break;
            default: snprintf(v, sizeof v, "%g", st[i].value.f64); break;
            }
            snprintf(line, sizeof line, "    %s: %s\n", st[i].name, v);
            append(&buf, &len, &cap, line);
        }
        free(st);
        const char *ir_dir = getenv("TANDEM_VK_IR_DIR");
        if (ir_dir && *ir_dir) {
            uint32_t nr = 0;
            next_exec_ir(the_device, &ex, &nr, NULL);
            VkPipelineExecutableInternalRepresentationKHR *ir = calloc(nr, sizeof *ir);
            for (uint32_t i = 0; i < nr; i++) ir[i].sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_INTERNAL_REPRESENTATION_KHR;
            next_exec_ir(the_device, &ex, &nr, ir);
            for (uint32_t i = 0; i < nr; i++) ir[i].pData = calloc(1, ir[i].dataSize + 1);
            next_exec_ir(the_device, &ex, &nr, ir);
            for (uint32_t i = 0; i < nr; i++) {
                char path[1024];
                snprintf(path, sizeof path, "%s/%llx.%u.%u.txt", ir_dir,
                         (unsigned long long)(uintptr_t)pipeline, e, i);
                FILE *f = fopen(path, "w");
                if (f) {
                    if (ir[i].isText) fputs(ir[i].pData, f);
                    else fwrite(ir[i].pData, 1, ir[i].dataSize, f);
                    fclose(f);
                }
                snprintf(line, sizeof line, "    ir %u (%s, %zu bytes): %s\n", i, ir[i].name,
                         ir[i].dataSize, path);
                append(&buf, &len, &cap, line);
                free(ir[i].pData);
            }
            free(ir);
        }
    }
    free(props);
    return buf;
}

static VKAPI_ATTR VkResult VKAPI_CALL stats_create_compute_pipelines(
    VkDevice device, VkPipelineCache cache, uint32_t count, const VkComputePipelineCreateInfo *infos,
    const VkAllocationCallbacks *alloc, VkPipeline *pipelines) {
    VkComputePipelineCreateInfo *mine = calloc(count ? count : 1, sizeof *mine);
    for (uint32_t i = 0; i < count; i++) {
        mine[i] = infos[i];
        mine[i].flags |= VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR;
        if (getenv("TANDEM_VK_IR_DIR")) mine[i].flags |= VK_PIPELINE_CREATE_CAPTURE_INTERNAL_REPRESENTATIONS_BIT_KHR;
    }
    VkResult r = next_create_compute(device, cache, count, mine, alloc, pipelines);
    free(mine);
    if (r != VK_SUCCESS) return r;
    for (uint32_t i = 0; i < count; i++) {
        unsigned s = pending_next++ % SLOTS;
        free(pending[s].text);
        pending[s].pipeline = (uint64_t)(uintptr_t)pipelines[i];
        pending[s].text = describe(pipelines[i]);
    }
    return r;
}

static VKAPI_ATTR VkResult VKAPI_CALL stats_set_name(VkDevice device, const VkDebugUtilsObjectNameInfoEXT *info) {
    if (info->objectType == VK_OBJECT_TYPE_PIPELINE) {
        for (unsigned s = 0; s < SLOTS; s++) {
            if (pending[s].text && pending[s].pipeline == info->objectHandle) {
                fprintf(out(), "pipeline %s\n%s", info->pObjectName ? info->pObjectName : "?", pending[s].text);
                fflush(out());
                free(pending[s].text);
                pending[s].text = NULL;
            }
        }
    }
    return next_set_name ? next_set_name(device, info) : VK_SUCCESS;
}

static VKAPI_ATTR VkResult VKAPI_CALL stats_create_instance(const VkInstanceCreateInfo *info,
                                                            const VkAllocationCallbacks *alloc, VkInstance *instance) {
    VkLayerInstanceCreateInfo *link = (VkLayerInstanceCreateInfo *)info->pNext;
    while (link && !(link->sType == VK_STRUCTURE_TYPE_LOADER_INSTANCE_CREATE_INFO && link->function == VK_LAYER_LINK_INFO))
        link = (VkLayerInstanceCreateInfo *)link->pNext;
    if (!link) return VK_ERROR_INITIALIZATION_FAILED;
    next_gipa = link->u.pLayerInfo->pfnNextGetInstanceProcAddr;
    link->u.pLayerInfo = link->u.pLayerInfo->pNext;
    PFN_vkCreateInstance create = (PFN_vkCreateInstance)next_gipa(VK_NULL_HANDLE, "vkCreateInstance");
    return create(info, alloc, instance);
}

static VKAPI_ATTR VkResult VKAPI_CALL stats_create_device(VkPhysicalDevice phys, const VkDeviceCreateInfo *info,
                                                          const VkAllocationCallbacks *alloc, VkDevice *device) {
    VkLayerDeviceCreateInfo *link = (VkLayerDeviceCreateInfo *)info->pNext;
    while (link && !(link->sType == VK_STRUCTURE_TYPE_LOADER_DEVICE_CREATE_INFO && link->function == VK_LAYER_LINK_INFO))
        link = (VkLayerDeviceCreateInfo *)link->pNext;
    if (!link) return VK_ERROR_INITIALIZATION_FAILED;
    PFN_vkGetInstanceProcAddr gipa = link->u.pLayerInfo->pfnNextGetInstanceProcAddr;
    next_gdpa = link->u.pLayerInfo->pfnNextGetDeviceProcAddr;
    link->u.pLayerInfo = link->u.pLayerInfo->pNext;
    PFN_vkCreateDevice create = (PFN_vkCreateDevice)gipa(VK_NULL_HANDLE, "vkCreateDevice");

    // The application's extensions plus VK_KHR_pipeline_executable_properties, and its feature.
    VkDeviceCreateInfo mine = *info;
    const char **ext = malloc((info->enabledExtensionCount + 1) * sizeof *ext);
    uint32_t n = 0;
    int have = 0;
    for (uint32_t i = 0; i < info->enabledExtensionCount; i++) {
        ext[n++] = info->ppEnabledExtensionNames[i];
        have |= !strcmp(info->ppEnabledExtensionNames[i], VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME);
    }
    if (!have) ext[n++] = VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME;
    mine.enabledExtensionCount = n;
    mine.ppEnabledExtensionNames = ext;
    VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR feature = {
        VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_EXECUTABLE_PROPERTIES_FEATURES_KHR, (void *)info->pNext, VK_TRUE};
    mine.pNext = &feature;
    VkResult r = create(phys, &mine, alloc, device);
    free(ext);
    if (r == VK_ERROR_EXTENSION_NOT_PRESENT || r == VK_ERROR_FEATURE_NOT_PRESENT) {
        fprintf(stderr, "vk-stats layer: this device has no VK_KHR_pipeline_executable_properties; no statistics\n");
        r = create(phys, info, alloc, device);
        if (r == VK_SUCCESS) next_set_name = (PFN_vkSetDebugUtilsObjectNameEXT)next_gdpa(*device, "vkSetDebugUtilsObjectNameEXT");
        return r;
    }
    if (r != VK_SUCCESS) return r;
    the_device = *device;
    next_create_compute = (PFN_vkCreateComputePipelines)next_gdpa(*device, "vkCreateComputePipelines");
    next_set_name = (PFN_vkSetDebugUtilsObjectNameEXT)next_gdpa(*device, "vkSetDebugUtilsObjectNameEXT");
    next_exec_props = (PFN_vkGetPipelineExecutablePropertiesKHR)next_gdpa(*device, "vkGetPipelineExecutablePropertiesKHR");
    next_exec_stats = (PFN_vkGetPipelineExecutableStatisticsKHR)next_gdpa(*device, "vkGetPipelineExecutableStatisticsKHR");
    next_exec_ir = (PFN_vkGetPipelineExecutableInternalRepresentationsKHR)next_gdpa(
        *device, "vkGetPipelineExecutableInternalRepresentationsKHR");
    return r;
}

EXPORT VKAPI_ATTR PFN_vkVoidFunction VKAPI_CALL vk_stats_GetDeviceProcAddr(VkDevice device, const char *name);

EXPORT VKAPI_ATTR PFN_vkVoidFunction VKAPI_CALL vk_stats_GetInstanceProcAddr(VkInstance instance, const char *name) {
    if (!strcmp(name, "vkGetInstanceProcAddr")) return (PFN_vkVoidFunction)vk_stats_GetInstanceProcAddr;
    if (!strcmp(name, "vkGetDeviceProcAddr")) return (PFN_vkVoidFunction)vk_stats_GetDeviceProcAddr;
    if (!strcmp(name, "vkCreateInstance")) return (PFN_vkVoidFunction)stats_create_instance;
    if (!strcmp(name, "vkCreateDevice")) return (PFN_vkVoidFunction)stats_create_device;
    if (!strcmp(name, "vkSetDebugUtilsObjectNameEXT")) return (PFN_vkVoidFunction)stats_set_name;
    return next_gipa ? next_gipa(instance, name) : NULL;
}

EXPORT VKAPI_ATTR PFN_vkVoidFunction VKAPI_CALL vk_stats_GetDeviceProcAddr(VkDevice device, const char *name) {
    if (!strcmp(name, "vkGetDeviceProcAddr")) return (PFN_vkVoidFunction)vk_stats_GetDeviceProcAddr;
    if (!the_device) return next_gdpa ? next_gdpa(device, name) : NULL;
    if (!strcmp(name, "vkCreateComputePipelines")) return (PFN_vkVoidFunction)stats_create_compute_pipelines;
    if (!strcmp(name, "vkSetDebugUtilsObjectNameEXT")) return (PFN_vkVoidFunction)stats_set_name;
    return next_gdpa ? next_gdpa(device, name) : NULL;
}
